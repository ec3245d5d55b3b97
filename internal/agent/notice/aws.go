package notice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gangwayhq/gangway/internal/agent"
)

// AWS watches EC2's instance metadata service (IMDSv2) for a spot
// interruption (spot/instance-action) and a rebalance recommendation.
type AWS struct {
	o Options

	token        string
	tokenExpires time.Time
	// last is what each path last said, so a notice goes out once.
	lastAction, lastRebalance string
}

var _ Watcher = (*AWS)(nil)

// IMDSv2 paths and headers.
const (
	awsTokenPath     = "/latest/api/token"
	awsActionPath    = "/latest/meta-data/spot/instance-action"
	awsRebalancePath = "/latest/meta-data/events/recommendations/rebalance"
	awsTokenTTL      = 6 * time.Hour
	awsTokenTTLHdr   = "X-aws-ec2-metadata-token-ttl-seconds"
	awsTokenHdr      = "X-aws-ec2-metadata-token"
)

// NewAWS returns the AWS watcher.
func NewAWS(o Options) *AWS { return &AWS{o: o.withDefaults()} }

// Name is "aws".
func (w *AWS) Name() string { return "aws" }

// Watch polls both paths every AWSInterval.
func (w *AWS) Watch(ctx context.Context, out chan<- agent.Notice) error {
	return poll(ctx, w.o.AWSInterval, func(ctx context.Context) error {
		if err := w.check(ctx, out); err != nil {
			if ctx.Err() == nil {
				w.o.Log.Warn("instance metadata poll failed", "error", err)
			}
			return err
		}
		return nil
	})
}

func (w *AWS) check(ctx context.Context, out chan<- agent.Notice) error {
	body, err := w.get(ctx, awsActionPath)
	if err != nil {
		return err
	}
	if body != "" && body != w.lastAction {
		var action struct {
			Action string    `json:"action"`
			Time   time.Time `json:"time"`
		}
		if err := json.Unmarshal([]byte(body), &action); err != nil {
			return fmt.Errorf("%s: %w: %q", awsActionPath, err, body)
		}
		n := agent.Notice{Kind: agent.NoticeInterruption, Deadline: action.Time, Source: "aws-imds",
			Detail: "spot instance-action " + action.Action}
		if err := send(ctx, out, n); err != nil {
			return err
		}
		w.lastAction = body
		w.o.Log.Warn("spot interruption notice", "action", action.Action, "time", action.Time)
	}
	body, err = w.get(ctx, awsRebalancePath)
	if err != nil {
		return err
	}
	if body != "" && body != w.lastRebalance {
		var rec struct {
			NoticeTime string `json:"noticeTime"`
		}
		_ = json.Unmarshal([]byte(body), &rec) // the notice matters, not its time
		n := agent.Notice{Kind: agent.NoticeRebalance, Source: "aws-imds",
			Detail: strings.TrimSpace("rebalance recommendation " + rec.NoticeTime)}
		if err := send(ctx, out, n); err != nil {
			return err
		}
		w.lastRebalance = body
	}
	return nil
}

// get returns path's body, "" when it is 404 (no notice yet). It fetches
// a session token first and again when it expires or is refused.
func (w *AWS) get(ctx context.Context, path string) (string, error) {
	for try := 0; ; try++ {
		if w.token == "" || time.Now().After(w.tokenExpires) {
			if err := w.fetchToken(ctx); err != nil {
				return "", err
			}
		}
		status, body, err := w.do(ctx, http.MethodGet, path, http.Header{awsTokenHdr: {w.token}})
		switch {
		case err != nil:
			return "", err
		case status == http.StatusOK:
			return strings.TrimSpace(body), nil
		case status == http.StatusNotFound:
			return "", nil
		case status == http.StatusUnauthorized && try == 0:
			w.token = "" // expired early (IMDS restarted); fetch another
			continue
		}
		return "", fmt.Errorf("GET %s: HTTP %d: %s", path, status, truncate(body))
	}
}

func (w *AWS) fetchToken(ctx context.Context) error {
	ttl := strconv.Itoa(int(awsTokenTTL / time.Second))
	status, body, err := w.do(ctx, http.MethodPut, awsTokenPath, http.Header{awsTokenTTLHdr: {ttl}})
	if err != nil {
		return err
	}
	if status != http.StatusOK || strings.TrimSpace(body) == "" {
		return fmt.Errorf("PUT %s: HTTP %d: %s", awsTokenPath, status, truncate(body))
	}
	w.token = strings.TrimSpace(body)
	// Renew well before the service forgets it.
	w.tokenExpires = time.Now().Add(awsTokenTTL - time.Minute)
	return nil
}

// probe says whether an IMDSv2 service answers: it hands out a token.
func (w *AWS) probe(ctx context.Context) bool {
	err := w.fetchToken(ctx)
	if err != nil {
		w.o.Log.Debug("no AWS instance metadata service", "error", err)
	}
	return err == nil
}

func (w *AWS) do(ctx context.Context, method, path string, h http.Header) (int, string, error) {
	return request(ctx, w.o, method, w.o.AWSBaseURL+path, h)
}

// request makes one metadata request and reads its body.
func request(ctx context.Context, o Options, method, url string, h http.Header) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("metadata request: %w", err)
	}
	req.Header = h
	resp, err := o.Client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return resp.StatusCode, string(b), nil
}

func truncate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

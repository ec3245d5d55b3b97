package notice

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gangwayhq/gangway/internal/agent"
)

// Watcher polls one cloud's metadata service.
type Watcher interface {
	// Watch sends notices on out until ctx ends, then returns ctx's
	// error. A metadata service that stops answering is logged and polled
	// again; it does not end the watch.
	Watch(ctx context.Context, out chan<- agent.Notice) error
	// Name says which cloud it watches ("aws" or "gcp").
	Name() string
}

// Options configures the watchers. The zero value watches the real
// metadata services.
type Options struct {
	// AWSBaseURL is the instance metadata service (default
	// http://169.254.169.254); GCPBaseURL the GCE metadata server
	// (default http://metadata.google.internal).
	AWSBaseURL string
	GCPBaseURL string
	// AWSInterval and GCPInterval are the poll periods (default 5s and
	// 1s).
	AWSInterval time.Duration
	GCPInterval time.Duration
	// RequestTimeout bounds one metadata request (default 2s);
	// ProbeTimeout bounds Detect's probes (default 2s).
	RequestTimeout time.Duration
	ProbeTimeout   time.Duration
	// Client makes the requests (default: a client with no proxy, which a
	// link-local metadata address must not go through).
	Client *http.Client
	Log    *slog.Logger
	// Now is the clock for GCP's deadlines (default time.Now).
	Now func() time.Time
}

// Defaults.
const (
	DefaultAWSBaseURL = "http://169.254.169.254"
	DefaultGCPBaseURL = "http://metadata.google.internal"
	// GCPNoticeWindow is how long GCP gives a preempted spot VM.
	GCPNoticeWindow = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.AWSBaseURL == "" {
		o.AWSBaseURL = DefaultAWSBaseURL
	}
	if o.GCPBaseURL == "" {
		o.GCPBaseURL = DefaultGCPBaseURL
	}
	if o.AWSInterval <= 0 {
		o.AWSInterval = 5 * time.Second
	}
	if o.GCPInterval <= 0 {
		o.GCPInterval = time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// New returns the watcher kind names: "aws" or "gcp". "none" returns nil
// and no error; "auto" is Detect's.
func New(kind string, o Options) (Watcher, error) {
	switch kind {
	case "aws":
		return NewAWS(o), nil
	case "gcp":
		return NewGCP(o), nil
	case "none":
		return nil, nil
	}
	return nil, fmt.Errorf("notice watcher %q: want aws, gcp or none", kind)
}

// Detect probes both metadata services at once, each for at most
// o.ProbeTimeout, and returns the watcher of the one that answers; nil
// when neither does (a node outside both clouds).
func Detect(ctx context.Context, o Options) Watcher {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	aws, gcp := NewAWS(o), NewGCP(o)
	found := make(chan Watcher, 2)
	go func() {
		if aws.probe(ctx) {
			found <- aws
		} else {
			found <- nil
		}
	}()
	go func() {
		if gcp.probe(ctx) {
			found <- gcp
		} else {
			found <- nil
		}
	}()
	for range 2 {
		if w := <-found; w != nil {
			o.Log.Info("cloud metadata service found; watching for preemption notices", "cloud", w.Name())
			return w
		}
	}
	o.Log.Info("no cloud metadata service answered; not watching for preemption notices")
	return nil
}

// send delivers n unless ctx ends first.
func send(ctx context.Context, out chan<- agent.Notice, n agent.Notice) error {
	select {
	case out <- n:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll calls check every interval, at once first, until ctx ends.
func poll(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := check(ctx); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

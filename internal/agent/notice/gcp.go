package notice

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gangwayhq/gangway/internal/agent"
)

// GCP watches the GCE metadata server for a spot or preemptible VM's
// preemption (instance/preempted) and host maintenance
// (instance/maintenance-event).
type GCP struct {
	o Options

	preempted   bool   // the preemption notice went out
	maintenance string // the maintenance event last sent ("" or NONE: none)
}

var _ Watcher = (*GCP)(nil)

// Metadata paths and the header the server wants and answers with.
const (
	gcpPreemptedPath   = "/computeMetadata/v1/instance/preempted"
	gcpMaintenancePath = "/computeMetadata/v1/instance/maintenance-event"
	gcpProbePath       = "/computeMetadata/v1/instance/id"
	gcpFlavorHdr       = "Metadata-Flavor"
	gcpFlavor          = "Google"
)

// NewGCP returns the GCP watcher.
func NewGCP(o Options) *GCP { return &GCP{o: o.withDefaults()} }

// Name is "gcp".
func (w *GCP) Name() string { return "gcp" }

// Watch polls both paths every GCPInterval: the notice window is 30 s.
func (w *GCP) Watch(ctx context.Context, out chan<- agent.Notice) error {
	return poll(ctx, w.o.GCPInterval, func(ctx context.Context) error {
		if err := w.check(ctx, out); err != nil {
			if ctx.Err() == nil {
				w.o.Log.Warn("metadata server poll failed", "error", err)
			}
			return err
		}
		return nil
	})
}

func (w *GCP) check(ctx context.Context, out chan<- agent.Notice) error {
	if !w.preempted {
		v, err := w.get(ctx, gcpPreemptedPath)
		if err != nil {
			return err
		}
		if v == "TRUE" {
			// GCP does not say when; it gives about 30 s from now.
			n := agent.Notice{Kind: agent.NoticeInterruption, Deadline: w.o.Now().Add(GCPNoticeWindow),
				Source: "gcp-metadata", Detail: "instance preempted"}
			if err := send(ctx, out, n); err != nil {
				return err
			}
			w.preempted = true
			w.o.Log.Warn("preemption notice", "deadline", n.Deadline)
		}
	}
	v, err := w.get(ctx, gcpMaintenancePath)
	if err != nil {
		return err
	}
	switch {
	case v == "NONE" || v == "":
		w.maintenance = "" // over; a later event is news again
	case v != w.maintenance:
		n := agent.Notice{Kind: agent.NoticeMaintenance, Source: "gcp-metadata", Detail: "maintenance-event " + v}
		if err := send(ctx, out, n); err != nil {
			return err
		}
		w.maintenance = v
		w.o.Log.Warn("host maintenance notice", "event", v)
	}
	return nil
}

// get returns path's value.
func (w *GCP) get(ctx context.Context, path string) (string, error) {
	status, body, err := request(ctx, w.o, http.MethodGet, w.o.GCPBaseURL+path, http.Header{gcpFlavorHdr: {gcpFlavor}})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %s", path, status, truncate(body))
	}
	return strings.TrimSpace(body), nil
}

// probe says whether a GCE metadata server answers: it tells the
// instance's ID and says it is Google's.
func (w *GCP) probe(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, w.o.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.o.GCPBaseURL+gcpProbePath, nil)
	if err != nil {
		return false
	}
	req.Header.Set(gcpFlavorHdr, gcpFlavor)
	resp, err := w.o.Client.Do(req)
	if err != nil {
		w.o.Log.Debug("no GCE metadata server", "error", err)
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && resp.Header.Get(gcpFlavorHdr) == gcpFlavor
}

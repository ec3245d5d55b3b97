package fullstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

// fakeTick is how often a fake cloud moves to the wall clock's time, so
// boots, notices and reclaims happen on time without a call to it.
const fakeTick = 250 * time.Millisecond

// Cloud is the cloud a server rents from: the providers' registry, the
// fake clouds among them (which need ticking), and what to close.
type Cloud struct {
	Registry *cloud.Registry
	Fakes    []*fake.Provider
	// Closers release the providers' clients (Close calls each).
	Closers []func() error
}

// Close releases the providers' clients.
func (c *Cloud) Close() error {
	var errs []error
	for _, f := range c.Closers {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// RunFakes ticks every fake cloud until ctx ends.
func (c *Cloud) RunFakes(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range c.Fakes {
		wg.Go(func() { _ = f.Run(ctx, fakeTick) })
	}
	wg.Wait()
}

// Describe says what the cloud offers, a line per offer.
func (c *Cloud) Describe(ctx context.Context) []string {
	offers, err := c.Registry.Offers(ctx)
	if err != nil || len(offers) == 0 {
		return []string{"no cloud: jobs never burst"}
	}
	var lines []string
	for _, o := range offers {
		lines = append(lines, fmt.Sprintf("cloud pool %s: %d×%s %s at $%.2f/h ($%.2f per GPU-hour)",
			o.Pool, o.GPUsPerInstance, o.GPUModel, o.CapacityType, o.PricePerHour, o.PricePerGPUHour()))
	}
	return lines
}

// Leftovers lists the instances still running in any provider, as
// "provider/instance (job J)", and the providers it could not list.
func (c *Cloud) Leftovers(ctx context.Context) []string {
	var left []string
	for _, p := range c.Registry.Providers() {
		insts, err := p.ListByTag(ctx, providers.TagJob, "")
		if err != nil {
			left = append(left, fmt.Sprintf("%s (cannot list: %v)", p.Name(), err))
			continue
		}
		for _, in := range insts {
			left = append(left, fmt.Sprintf("%s/%s (job %s)", p.Name(), in.ID, in.Tags[providers.TagJob]))
		}
	}
	return left
}

// ReportLeftovers says on out, after a demo, whether any instance is
// still running (waiting up to 15 s for the last terminations); nothing
// when the stack has no cloud.
func (c *Cloud) ReportLeftovers(ctx context.Context, out io.Writer) {
	if len(c.Registry.Names()) == 0 {
		return
	}
	left := c.WaitNoLeftovers(ctx, 15*time.Second)
	if len(left) == 0 {
		fmt.Fprintln(out, "\ncloud: no instance left running")
		return
	}
	fmt.Fprintf(out, "\ncloud: %d instances still running: %s (the reconciler terminates orphans after a minute)\n",
		len(left), strings.Join(left, ", "))
}

// WaitNoLeftovers waits up to wait for every instance to be gone, as
// terminations land a few seconds after their job ends, and returns what
// Leftovers still lists then.
func (c *Cloud) WaitNoLeftovers(ctx context.Context, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		left := c.Leftovers(ctx)
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// FakeHooks are the callbacks of fake clouds: the stand-in for the boot
// script a real instance runs (see FakeAgents).
type FakeHooks struct {
	OnRunning    func(providers.Instance)
	OnNotice     func(fake.Notice)
	OnTerminated func(providers.Instance)
}

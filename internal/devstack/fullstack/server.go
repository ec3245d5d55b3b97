package fullstack

import (
	"context"
	"log/slog"
	"sync"

	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/server"
)

// RunServer runs server.Run, as `gangway server` does, with the cloud
// cloud builds (nil: none): its fake providers' instances boot into
// in-process agents with fakeAgent as their base config, and its fakes are
// ticked until ctx ends. o.Cloud is set to the cloud's registry.
func RunServer(ctx context.Context, o server.Options, fakeAgent agent.Config,
	cloud func(ctx context.Context, hooks FakeHooks) (*Cloud, error)) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var names []string
	if cloud != nil {
		agents := NewFakeAgents(o.View, o.Temporal, fakeAgent, log, nil)
		agents.Auth = o.NodeAuth
		defer agents.Close()
		c, err := cloud(ctx, agents.Hooks())
		if err != nil {
			return err
		}
		defer c.Close()
		// The fakes stop ticking before the cloud and the agents close.
		fakes, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { c.RunFakes(fakes) })
		defer wg.Wait()
		defer stop()
		o.Cloud, names = c.Registry, c.Registry.Names()
	}
	log.Info("gangway server starting", "holder", o.Dispatch.Holder, "cloud_providers", names)
	return server.Run(ctx, o)
}

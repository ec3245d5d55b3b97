package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/providers"
)

// runBurst runs one attempt on instances rented for it, a saga: for each
// offer in turn it launches (idempotently, by a token derived from job,
// attempt and offer), waits for the agents to register, queues the job
// pinned to those nodes, runs the gang there, and — on every path, success,
// failure, cancellation, a notice — terminates what it launched. An offer
// that gives no capacity, or whose instances do not come up in time, falls
// through to the next; when none works the job goes back to the queue.
func (j *job) runBurst(ctx workflow.Context, entry gangway.QueueEntry, req BurstRequest) attemptEnd {
	j.setPhase(ctx, gangway.PhaseProvisioning, req.Reason)
	var tried []string
	for i, offer := range req.Offers {
		token := burstToken(j.spec.Name, entry.Attempt, i)
		var res ProvisionResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, provisionActivity),
			ActivityProvision, ProvisionInput{JobID: j.spec.Name, Attempt: entry.Attempt, Team: j.spec.Team,
				Project: j.spec.Project, Token: token, Offer: offer,
				MaxPricePerHour: j.spec.Burst.MaxPricePerGPUHour * float64(j.spec.Gang.GPUsPerReplica),
				// Long enough for the launch's retries and the boot.
				JoinBy: workflow.Now(ctx).Add(2*j.timing.BootTimeout + 5*time.Minute)}).Get(ctx, &res)
		if err != nil {
			// A launch cut short may have left instances: terminate by token.
			j.terminate(ctx, offer.Provider, token, nil)
			if ctx.Err() != nil {
				return attemptEnd{out: outcomeCancelled, cause: CauseCancelled, reason: "cancelled while provisioning"}
			}
			tried = append(tried, fmt.Sprintf("%s: %s", offer.Pool, errMessage(err)))
			continue
		}
		nodes := make([]string, len(res.Instances))
		for k, in := range res.Instances {
			nodes[k] = in.NodeID
		}
		end, ran := j.runOnInstances(ctx, entry, offer, nodes)
		j.terminate(ctx, offer.Provider, token, nodes)
		if ran {
			return end
		}
		tried = append(tried, fmt.Sprintf("%s: %s", offer.Pool, end.reason))
	}
	return attemptEnd{out: outcomeInfraFailure, cause: CauseNoCapacity,
		reason: "burst found no capacity (" + strings.Join(tried, "; ") + ")"}
}

// runOnInstances waits for the instances' agents, then queues the job
// pinned to them and runs it there once placed. ran is false when the
// instances never became usable (end.reason says why); the caller then
// tries the next offer.
func (j *job) runOnInstances(ctx workflow.Context, entry gangway.QueueEntry, offer gangway.BurstOffer, nodes []string) (end attemptEnd, ran bool) {
	cancelled := attemptEnd{out: outcomeCancelled, cause: CauseCancelled, reason: "cancelled while provisioning"}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: j.timing.BootTimeout + time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	err := workflow.ExecuteActivity(actx, ActivityAwaitNodes,
		AwaitNodesInput{NodeIDs: nodes, Timeout: j.timing.BootTimeout}).Get(ctx, nil)
	switch {
	case ctx.Err() != nil:
		return cancelled, true
	case err != nil:
		return attemptEnd{reason: "instances did not register: " + errMessage(err)}, false
	}
	entry.Nodes, entry.Pools, entry.EnqueuedAt = nodes, []string{offer.Pool}, workflow.Now(ctx)
	if !j.enqueue(ctx, entry) {
		return cancelled, true
	}
	asg, ok := j.waitPinnedPlacement(ctx, entry.Attempt)
	if !ok {
		j.withdraw(ctx)
		if ctx.Err() != nil {
			return cancelled, true
		}
		// The instances went away (or never became schedulable) before
		// the job was placed on them.
		return attemptEnd{reason: fmt.Sprintf("not placed on its instances within %s", j.timing.BootTimeout)}, false
	}
	// Each member rents a whole instance: billed as placement priced it.
	for i := range asg.Members {
		m := &asg.Members[i]
		m.CapacityType, m.PricePerGPUHour = offer.CapacityType, offer.PricePerGPUHourFor(len(m.GPUs))
	}
	return j.runPlaced(ctx, asg), true
}

// waitPinnedPlacement waits up to BootTimeout for the placement on the
// job's own instances (a spot instance reclaimed in the meantime would
// leave it waiting forever); a repeated burst signal (from a new dispatch
// leader) is ignored.
func (j *job) waitPinnedPlacement(ctx workflow.Context, attempt int) (gangway.Assignment, bool) {
	wctx, stop := workflow.WithCancel(ctx)
	defer stop()
	workflow.Go(wctx, func(gctx workflow.Context) {
		if workflow.NewTimer(gctx, j.timing.BootTimeout).Get(gctx, nil) == nil {
			stop()
		}
	})
	for {
		asg, burst, ok := j.waitPlacement(wctx, attempt)
		if !ok || burst == nil {
			return asg, ok
		}
	}
}

// terminate is the saga's compensation: it ends every instance launched
// with token and forgets their nodes. It runs on a disconnected context so
// it happens even when the workflow is cancelled, and retries without limit.
func (j *job) terminate(ctx workflow.Context, provider, token string, nodes []string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, serverActivity),
		ActivityTerminate, TerminateInput{Provider: provider, Token: token, JobID: j.spec.Name, NodeIDs: nodes}).Get(dctx, nil)
	if err != nil {
		// Terminate retries without limit; the orphan reconciler is the
		// backstop if it is ever misregistered.
		workflow.GetLogger(ctx).Error("terminate failed", "token", token, "error", err)
	}
}

// provisionActivity launches instances: transient cloud errors are retried
// (the token makes that safe); capacity, quota and price errors are not.
var provisionActivity = workflow.ActivityOptions{
	TaskQueue:           TaskQueue,
	StartToCloseTimeout: 2 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
		MaximumAttempts:    6,
	},
}

// burstToken is the idempotency token of offer i of one attempt.
func burstToken(job gangway.JobID, attempt, offer int) string {
	if offer == 0 {
		return providers.Token(job, attempt)
	}
	return providers.Token(fmt.Sprintf("%s/offer-%d", job, offer), attempt)
}

func errMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

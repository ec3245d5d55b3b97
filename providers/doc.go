// Package providers is where cloud capacity plugs into Gangway: the
// Provider interface that every cloud implements, the vocabulary around it
// (LaunchRequest, Instance, instance states, the gangway-* tags) and the
// pieces all providers share. Offers and capacity types are the root
// package's gangway.Offer and gangway.CapacityType: placement prices the
// same Offer a provider lists, and a burst hands it back to Launch.
//
//   - Provider: Offers (what can be launched now, at what price and
//     interruption rate), Launch (idempotent by token, all-or-nothing down
//     to MinCount), Describe, Terminate (idempotent) and ListByTag (for
//     compensation by token and the orphan reconciler by job).
//   - Sentinel errors (ErrNoCapacity, ErrQuota, ErrPriceTooLow, ErrNotFound,
//     ErrAuth, ErrThrottled, ErrInvalid) that providers wrap around the
//     cloud's own error, Retryable to tell a transient failure from one that
//     needs another offer or a person, and Reason to name them for logs,
//     metrics and Temporal error types.
//   - Token and RequestUUID: deterministic idempotency keys from job ID and
//     attempt (EC2 ClientToken, GCE requestId), computed in the workflow and
//     passed to the launch activity so every retry reuses them.
//   - BootScript: the user data that starts `gangway agent` on a launched
//     instance, with the join credentials in its environment.
//
// The implementations live in subpackages, which never import each other:
// aws (EC2 through aws-sdk-go-v2), gcp (Compute Engine through
// cloud.google.com/go/compute) and fake (an in-process cloud driven by spot
// traces, for `gangway dev` and the simulator). providertest holds the one
// conformance suite all three pass; the AWS and GCP runs go through the
// real SDK clients against local servers in internal/ec2fake and
// internal/gcefake that speak the EC2 Query and Compute REST wire formats.
package providers

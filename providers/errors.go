package providers

import (
	"context"
	"errors"
)

// Sentinel errors. Providers wrap them (with %w) around the cloud's own
// error, so both errors.Is(err, ErrNoCapacity) and errors.As on the SDK's
// error type work.
var (
	// ErrNoCapacity: the zone has no capacity of this type now (a stockout,
	// a spot pool drained). Another offer, or later, may work.
	ErrNoCapacity = errors.New("no capacity")
	// ErrQuota: an account limit (instances, vCPUs, GPUs, spot requests)
	// stops the launch. It does not clear by retrying.
	ErrQuota = errors.New("quota exceeded")
	// ErrPriceTooLow: the spot price is above the request's maximum.
	ErrPriceTooLow = errors.New("spot price above the maximum")
	// ErrNotFound: the instance (or another named resource) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAuth: the credentials are missing, wrong or not allowed to do this.
	ErrAuth = errors.New("not authorized")
	// ErrThrottled: the cloud's API rate limit; retry with backoff.
	ErrThrottled = errors.New("throttled")
	// ErrInvalid: the request is malformed, or names a zone or instance type
	// the provider is not configured for, or reuses a token with different
	// parameters. Retrying the same request cannot help.
	ErrInvalid = errors.New("invalid request")
)

// Retryable reports whether repeating the same call (with the same token)
// may succeed: throttling and transient failures (deadlines, dropped
// connections, server errors) are retryable. No capacity, quota, price,
// not found, auth and invalid requests are not: the caller should change
// something — another offer, later, a person — rather than retry as is.
// Activities map this to Temporal's non-retryable application errors.
func Retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrThrottled):
		return true
	case errors.Is(err, ErrNoCapacity), errors.Is(err, ErrQuota), errors.Is(err, ErrPriceTooLow),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrAuth), errors.Is(err, ErrInvalid):
		return false
	case errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// Reason names the sentinel err wraps, for logs, metric labels and
// Temporal application error types: "NoCapacity", "Quota", "PriceTooLow",
// "NotFound", "Auth", "Throttled", "Invalid", or "" when none.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return ""
}

var reasons = []struct {
	err  error
	name string
}{
	{ErrNoCapacity, "NoCapacity"},
	{ErrQuota, "Quota"},
	{ErrPriceTooLow, "PriceTooLow"},
	{ErrNotFound, "NotFound"},
	{ErrAuth, "Auth"},
	{ErrThrottled, "Throttled"},
	{ErrInvalid, "Invalid"},
}

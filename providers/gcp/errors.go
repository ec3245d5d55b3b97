package gcp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/gangwayhq/gangway/providers"
)

// opCodes maps the error codes of failed operations to sentinels.
var opCodes = map[string]error{
	"ZONE_RESOURCE_POOL_EXHAUSTED":              providers.ErrNoCapacity,
	"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": providers.ErrNoCapacity,
	"RESOURCE_POOL_EXHAUSTED":                   providers.ErrNoCapacity,
	"UNSUPPORTED_OPERATION":                     providers.ErrNoCapacity, // e.g. this GPU is not offered in the zone
	"QUOTA_EXCEEDED":                            providers.ErrQuota,
	"RATE_LIMIT_EXCEEDED":                       providers.ErrThrottled,
	"PERMISSIONS_ERROR":                         providers.ErrAuth,
	"RESOURCE_NOT_FOUND":                        providers.ErrNotFound,
	"INVALID_FIELD_VALUE":                       providers.ErrInvalid,
	"INVALID_USAGE":                             providers.ErrInvalid,
}

// reasons maps googleapi error reasons that say more than the status code.
var reasons = map[string]error{
	"rateLimitExceeded":            providers.ErrThrottled,
	"userRateLimitExceeded":        providers.ErrThrottled,
	"quotaExceeded":                providers.ErrQuota,
	"forbidden":                    providers.ErrAuth,
	"insufficientPermissions":      providers.ErrAuth,
	"ZONE_RESOURCE_POOL_EXHAUSTED": providers.ErrNoCapacity,
}

// mapError wraps a Compute error with the operation and, when known, the
// sentinel; op is the failed operation, if any, whose error codes are
// checked first. The googleapi.Error stays reachable with errors.As.
func mapError(what string, err error, op *computepb.Operation) error {
	if sentinel := classify(err, op); sentinel != nil {
		return fmt.Errorf("gcp: %s: %w: %w", what, sentinel, err)
	}
	return fmt.Errorf("gcp: %s: %w", what, err)
}

func classify(err error, op *computepb.Operation) error {
	for _, e := range op.GetError().GetErrors() {
		if s, ok := opCodes[e.GetCode()]; ok {
			return s
		}
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return nil
	}
	for _, item := range ge.Errors {
		if s, ok := reasons[item.Reason]; ok {
			return s
		}
	}
	text := strings.ToLower(ge.Message)
	switch ge.Code {
	case http.StatusNotFound:
		return providers.ErrNotFound
	case http.StatusUnauthorized:
		return providers.ErrAuth
	case http.StatusForbidden:
		if strings.Contains(text, "quota") {
			return providers.ErrQuota
		}
		return providers.ErrAuth
	case http.StatusTooManyRequests:
		return providers.ErrThrottled
	case http.StatusServiceUnavailable:
		// A stockout answered directly rather than through the operation.
		if strings.Contains(text, "resource_pool_exhausted") || strings.Contains(text, "does not have enough resources") {
			return providers.ErrNoCapacity
		}
	case http.StatusBadRequest, http.StatusConflict:
		return providers.ErrInvalid
	}
	return nil
}

// isAlreadyExists reports a 409 for a name already taken: for a launch, a
// VM an earlier try of the same token made.
func isAlreadyExists(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusConflict {
		return false
	}
	for _, item := range ge.Errors {
		if item.Reason == "alreadyExists" {
			return true
		}
	}
	return strings.Contains(ge.Message, "already exists")
}

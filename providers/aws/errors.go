package aws

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/gangwayhq/gangway/providers"
)

// codes maps EC2 error codes to Gangway's sentinels.
var codes = map[string]error{
	// The zone has none of this type now: try another zone, type or later.
	"InsufficientInstanceCapacity":      providers.ErrNoCapacity,
	"InsufficientCapacity":              providers.ErrNoCapacity,
	"UnfulfillableCapacity":             providers.ErrNoCapacity,
	"InsufficientHostCapacity":          providers.ErrNoCapacity,
	"InsufficientFreeAddressesInSubnet": providers.ErrNoCapacity,
	// "Your requested instance type is not supported in your requested
	// Availability Zone": never here, so another offer.
	"Unsupported": providers.ErrNoCapacity,

	// Account limits. MaxSpotInstanceCountExceeded is the spot request
	// limit, not a shortage in the zone: retrying elsewhere hits it too.
	"MaxSpotInstanceCountExceeded": providers.ErrQuota,
	"InstanceLimitExceeded":        providers.ErrQuota,
	"VcpuLimitExceeded":            providers.ErrQuota,

	"SpotMaxPriceTooLow": providers.ErrPriceTooLow,

	"RequestLimitExceeded": providers.ErrThrottled,
	"Throttling":           providers.ErrThrottled,
	"ThrottlingException":  providers.ErrThrottled,

	"AuthFailure":           providers.ErrAuth,
	"UnauthorizedOperation": providers.ErrAuth,
	"OptInRequired":         providers.ErrAuth,
	"Blocked":               providers.ErrAuth,
	"SignatureDoesNotMatch": providers.ErrAuth,
	"InvalidClientTokenId":  providers.ErrAuth,
	"ExpiredToken":          providers.ErrAuth,

	"InvalidInstanceID.NotFound": providers.ErrNotFound,

	"IdempotentParameterMismatch": providers.ErrInvalid,
	"InvalidInstanceID.Malformed": providers.ErrInvalid,
	"InvalidParameterValue":       providers.ErrInvalid,
	"InvalidParameterCombination": providers.ErrInvalid,
	"InvalidParameter":            providers.ErrInvalid,
	"MissingParameter":            providers.ErrInvalid,
	"InvalidAMIID.NotFound":       providers.ErrInvalid,
	"InvalidAMIID.Malformed":      providers.ErrInvalid,
	"InvalidSubnetID.NotFound":    providers.ErrInvalid,
	"InvalidGroup.NotFound":       providers.ErrInvalid,
	"InvalidKeyPair.NotFound":     providers.ErrInvalid,
}

// mapError wraps an EC2 error with the operation and, when its code is
// known, the sentinel: errors.Is(err, providers.ErrNoCapacity) and
// errors.As(err, &smithy.APIError) both hold.
func mapError(op string, err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if sentinel, ok := codes[apiErr.ErrorCode()]; ok {
			return fmt.Errorf("aws: %s: %w: %w", op, sentinel, err)
		}
	}
	return fmt.Errorf("aws: %s: %w", op, err)
}

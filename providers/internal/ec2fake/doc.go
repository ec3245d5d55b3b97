// Package ec2fake is a fake EC2 Query API endpoint for tests: form POSTs
// in, XML in the 2016-11-15 namespace out, errors as
// <Response><Errors><Error><Code>. It serves RunInstances (ClientToken
// idempotency, spot market options, tag specifications, MinCount/MaxCount
// capacity), DescribeInstances (instance IDs, tag, tag-key, state and
// instance-id filters, pagination), TerminateInstances (unknown IDs fail
// the call, as on EC2) and DescribeSpotPriceHistory, keeps what it
// launched, records the requests it got and injects faults.
package ec2fake

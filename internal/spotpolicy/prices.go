package spotpolicy

import "strings"

// OnDemandPrices is the on-demand list price, in dollars per instance-hour,
// of the instance types the public spot traces (skypilot-org/spot-traces)
// were recorded on: AWS EC2 On-Demand pricing for Linux in us-east-1
// (aws.amazon.com/ec2/pricing/on-demand, the same in us-east-2 and
// us-west-2 for these types). It is data, not a tuning knob: the replay
// prices on-demand at it, and spot where a trace has no prices at a share
// of it. A trace's own metadata price wins over it.
var OnDemandPrices = map[string]float64{
	"p3.2xlarge":  3.06,  // 1 × V100
	"p3.8xlarge":  12.24, // 4 × V100
	"p3.16xlarge": 24.48, // 8 × V100
	"p2.xlarge":   0.90,  // 1 × K80
	"p2.8xlarge":  7.20,  // 8 × K80
	"p2.16xlarge": 14.40, // 16 × K80
	"r5.16xlarge": 4.032, // 64 vCPUs, the traces' "intel_64"
}

// awsDevices maps the traces' device names (accelerator_GPUs, or
// intel_vCPUs) to the AWS instance type that has exactly that.
var awsDevices = map[string]string{
	"v100_1": "p3.2xlarge", "v100_4": "p3.8xlarge", "v100_8": "p3.16xlarge",
	"k80_1": "p2.xlarge", "k80_8": "p2.8xlarge", "k80_16": "p2.16xlarge",
	"intel_64": "r5.16xlarge",
}

// InstanceTypeOf names the AWS instance type of a trace's device ("" when
// it is not an AWS zone's, or the device is not known). AWS zones look
// like "us-east-1a": a region ending in a digit, then the zone letter.
func InstanceTypeOf(zone, device string) string {
	if !awsZone(zone) {
		return ""
	}
	return awsDevices[strings.ToLower(device)]
}

func awsZone(zone string) bool {
	n := len(zone)
	if n < 3 || strings.Count(zone, "-") < 2 {
		return false
	}
	last, prev := zone[n-1], zone[n-2]
	return last >= 'a' && last <= 'z' && prev >= '0' && prev <= '9'
}

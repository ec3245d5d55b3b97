package gangway

import (
	"fmt"
	"regexp"
	"strconv"
)

// MIGProfile is a MIG profile read apart: "1g.10gb" is one compute slice
// of the GPU with 10 GB of memory; "1c.3g.40gb" is a compute instance of
// one slice inside a three-slice GPU instance.
type MIGProfile struct {
	// Slices is the compute slices the device runs on: the "Nc" of a
	// compute instance profile, else the "Ng".
	Slices int
	// GPUSlices is the GPU instance's slices (the "Ng"), MemGB its memory.
	GPUSlices int
	MemGB     int
}

// migProfileRE is NVIDIA's profile syntax: an optional compute instance
// part ("1c."), the GPU instance ("3g.40gb") and optional attributes
// ("+me", "-me", "+gfx").
var migProfileRE = regexp.MustCompile(`^(?:([1-8])c\.)?([1-8])g\.([1-9][0-9]{0,3})gb((?:[+-][a-z]+(?:\.[a-z]+)*)*)$`)

// ParseMIGProfile reads a MIG profile such as "1g.10gb", "3g.40gb",
// "1g.10gb+me" or "1c.3g.40gb".
func ParseMIGProfile(s string) (MIGProfile, error) {
	m := migProfileRE.FindStringSubmatch(s)
	if m == nil {
		return MIGProfile{}, fmt.Errorf("MIG profile %q: want compute slices and memory such as 1g.10gb or 3g.40gb", s)
	}
	p := MIGProfile{}
	p.GPUSlices, _ = strconv.Atoi(m[2])
	p.MemGB, _ = strconv.Atoi(m[3])
	p.Slices = p.GPUSlices
	if m[1] != "" {
		p.Slices, _ = strconv.Atoi(m[1])
		if p.Slices > p.GPUSlices {
			return MIGProfile{}, fmt.Errorf("MIG profile %q: a compute instance of %d slices does not fit a GPU instance of %d", s, p.Slices, p.GPUSlices)
		}
	}
	return p, nil
}

// MIGSlicesOf is how many compute slices a GPU of model divides into
// under MIG: 4 on the A30, 7 on the others (A100, H100, H200, B200, GH200,
// GB200).
func MIGSlicesOf(model string) int {
	if model == "A30" {
		return 4
	}
	return 7
}

// MIGMilli is what one MIG device of profile on a GPU of model counts
// for, in milli-GPU of its parent GPU: its compute slices out of the
// GPU's (MIGSlicesOf), rounded down, so that the devices of one GPU never
// add up to more than the GPU. On an H100, 1g.10gb is 142 milli-GPU
// (seven of them 994), 3g.40gb 428, 7g.80gb 1000. The ledger bills a MIG
// device this share of a GPU-second per second, and quotas count it. A
// profile that does not parse counts as a whole GPU.
func MIGMilli(model, profile string) int {
	p, err := ParseMIGProfile(profile)
	if err != nil {
		return MilliPerGPU
	}
	total := MIGSlicesOf(model)
	return min(p.Slices, total) * MilliPerGPU / total
}

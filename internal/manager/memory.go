package manager

import (
	"fmt"
	"strconv"
)

// MemoryLimitEnv carries the container's memory limit in bytes, from a
// resourceFieldRef on limits.memory (config/manager/manager.yaml).
const MemoryLimitEnv = "STEPWISE_MEMORY_LIMIT"

// memoryLimitShare is the part of the container limit given to the Go
// runtime as its soft limit. The rest is headroom: the soft limit counts
// only what the Go runtime maps, not what the kernel charges the container
// for besides (page tables, kernel buffers, fragmentation), and as the live
// heap nears it the collector runs back to back. At 100% the kernel's OOM
// killer fires before the collector has held the line.
const memoryLimitShare = 0.9

// SoftMemoryLimit is the Go soft memory limit (debug.SetMemoryLimit) for
// the container limit in MemoryLimitEnv: 90% of it. ok is false when no
// limit should be set: GOMEMLIMIT is set (the operator's choice wins, and
// the runtime already applied it), or the container limit is unknown.
func SoftMemoryLimit(getenv func(string) string) (limit int64, ok bool, err error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	raw := getenv(MemoryLimitEnv)
	if raw == "" {
		return 0, false, nil
	}
	container, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || container <= 0 {
		return 0, false, fmt.Errorf("%s=%q: want the container memory limit in bytes", MemoryLimitEnv, raw)
	}
	return int64(float64(container) * memoryLimitShare), true, nil
}

// DefaultGCPercent is the collector's target when GOGC is unset: a
// collection starts once the heap has grown by half the live heap, where
// Go's default waits for it to double. Most of the manager's live heap is
// its informer cache, which lives as long as the process, so the resident
// memory follows the collector's goal, not what is live. Measured with
// make bench-scale (docs/benchmarks.md): at 100 the Go runtime held about
// 2.3 times the live heap, at 50 about 1.8 times; the manager's peak at
// 10,800 updating Pods is 133-139 MiB at 50 against 164-170 at 100, for
// about twice as many collections: from none to a fifth more CPU in two
// runs.
const DefaultGCPercent = 50

// GCPercent is the collector's target (debug.SetGCPercent) for the
// manager: DefaultGCPercent. ok is false when GOGC is set: the operator's
// choice wins, and the runtime already applied it.
func GCPercent(getenv func(string) string) (percent int, ok bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return DefaultGCPercent, true
}

package idem

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Health's hosts are bounded whatever the outage's size, and ordered
// for the operator: unreachable first (the longest so first), then
// failing (the longest first), then slow, then only resting; a rest that is over,
// or further ahead than Run's longest interval (set while the clock ran
// fast), is not reported.
func TestHostStallsReport(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := newHostStalls(2)
	s.maxRest = time.Hour
	for i := range 50 {
		s.visited(fmt.Sprintf("failing-%02d", i), true, t0.Add(time.Duration(i)*time.Second))
	}
	for i := range 3 {
		host := fmt.Sprintf("down-%d", i)
		at := t0.Add(time.Duration(-i) * time.Minute)
		require.Equal(t, hostUnchanged, s.visited(host, true, at))
		require.Equal(t, hostFoundDown, s.visited(host, true, at.Add(time.Second)))
	}
	now := t0.Add(time.Minute)
	s.rested("resting", now.Add(10*time.Minute))
	s.rested("rested", now.Add(-time.Second))
	s.rested("stepped", now.Add(5*time.Hour))
	s.visited("back", true, t0)
	s.visited("back", false, t0.Add(time.Second))

	got, omitted := s.report(now)
	require.Len(t, got, HealthMaxHosts)
	require.Equal(t, 3+50+1-HealthMaxHosts, omitted)
	require.Equal(t, HostHealth{Host: "down-2", FailedVisits: 2, FailingSince: t0.Add(-2 * time.Minute),
		LastFailedVisit: t0.Add(-2*time.Minute + time.Second), DownSince: t0.Add(-2*time.Minute + time.Second)}, got[0])
	require.Equal(t, "down-1", got[1].Host)
	require.Equal(t, "down-0", got[2].Host)
	require.Equal(t, HostHealth{Host: "failing-00", FailedVisits: 1, FailingSince: t0, LastFailedVisit: t0}, got[3])
	require.Equal(t, "failing-28", got[HealthMaxHosts-1].Host)

	// With fewer hosts in trouble, a slow one comes after the failing
	// one and the resting one last, and a host answering again is gone.
	s = newHostStalls(2)
	s.maxRest = time.Hour
	s.rested("resting", now.Add(10*time.Minute))
	s.visited("failing", true, t0)
	s.slowed("slow", t0)
	got, omitted = s.report(now)
	require.Zero(t, omitted)
	require.Equal(t, []HostHealth{{Host: "failing", FailedVisits: 1, FailingSince: t0, LastFailedVisit: t0}, {Host: "slow", SlowSince: t0},
		{Host: "resting", RestUntil: now.Add(10 * time.Minute)}}, got)
	s.visited("failing", false, now)
	got, _ = s.report(now.Add(11 * time.Minute))
	require.Equal(t, []HostHealth{{Host: "slow", SlowSince: t0}}, got)

	// A slow host stays slow, since it first was, through a pass that
	// does not visit it (its operations pushed back) or takes it for slow
	// again, while what was pushed back waits; a pass that visits it and
	// does not ends it.
	s.passJudged(map[string]bool{"other": false}, map[string]time.Time{"slow": now.Add(time.Minute)}, now)
	s.slowed("slow", now)
	s.passJudged(map[string]bool{"slow": true}, nil, now)
	got, _ = s.report(now)
	require.Equal(t, []HostHealth{{Host: "slow", SlowSince: t0}}, got)
	s.passJudged(map[string]bool{"slow": false}, nil, now)
	got, _ = s.report(now)
	require.Empty(t, got)

	// Nor does one stay slow once nothing of it waits: every operation
	// of it settled in the pass that took it for slow, or the last one
	// pushed back has fallen due (Run visits a host only for its due
	// operations); a wait further ahead than Run's longest interval was
	// set while the clock ran fast.
	s.slowed("settled", now)
	s.passJudged(map[string]bool{"settled": true}, nil, now)
	s.slowed("waited", now)
	s.passJudged(map[string]bool{"waited": true}, map[string]time.Time{"waited": now.Add(time.Minute)}, now)
	s.slowed("fast", now)
	s.passJudged(map[string]bool{"fast": true}, map[string]time.Time{"fast": now.Add(2 * time.Hour)}, now)
	got, _ = s.report(now)
	require.Equal(t, []HostHealth{{Host: "waited", SlowSince: now}}, got)
	s.passJudged(nil, nil, now.Add(time.Minute))
	got, _ = s.report(now.Add(time.Minute))
	require.Empty(t, got)
	require.Empty(t, s.slowWait)

	// A host that holds requests until they time out looks slow until
	// they do: it is failing, and not taken for slow while it is.
	s.slowed("silent", now)
	s.visited("silent", true, now)
	s.slowed("silent", now)
	got, _ = s.report(now)
	require.Equal(t, []HostHealth{{Host: "silent", FailedVisits: 1, FailingSince: now, LastFailedVisit: now}}, got)
}

package idemtest

import "github.com/idemkit/idem/internal/fakeserver"

// The exported types are copies of the fake server's, field for field, so
// that go doc shows their fields here (the server's package is internal).
// These functions convert at the boundary; TestTypesMirrorTheServers
// fails when a field is added on one side only.

func (f Fault) internal() fakeserver.Fault {
	return fakeserver.Fault{
		Kind: fakeserver.FaultKind(f.Kind), Count: f.Count, Key: f.Key, Query: f.Query,
		Delay: f.Delay, RetryAfter: f.RetryAfter, HTTPDate: f.HTTPDate,
	}
}

func faultOf(f fakeserver.Fault) Fault {
	return Fault{
		Kind: FaultKind(f.Kind), Count: f.Count, Key: f.Key, Query: f.Query,
		Delay: f.Delay, RetryAfter: f.RetryAfter, HTTPDate: f.HTTPDate,
	}
}

func (p Profile) internal() fakeserver.Profile {
	out := fakeserver.Profile{Delay: p.Delay, RetryAfter: p.RetryAfter, HTTPDate: p.HTTPDate}
	if p.Rates != nil {
		out.Rates = make(map[fakeserver.FaultKind]float64, len(p.Rates))
		for k, r := range p.Rates {
			out.Rates[fakeserver.FaultKind(k)] = r
		}
	}
	return out
}

func (b Behavior) internal() fakeserver.Behavior {
	return fakeserver.Behavior{
		Name: b.Name, StoreErrors: b.StoreErrors, NoBodyCompare: b.NoBodyCompare,
		ConflictStatus: b.ConflictStatus, Retention: b.Retention, KeyMember: b.KeyMember, OpenOnly: b.OpenOnly,
	}
}

func behaviorOf(b fakeserver.Behavior) Behavior {
	return Behavior{
		Name: b.Name, StoreErrors: b.StoreErrors, NoBodyCompare: b.NoBodyCompare,
		ConflictStatus: b.ConflictStatus, Retention: b.Retention, KeyMember: b.KeyMember, OpenOnly: b.OpenOnly,
	}
}

func statsOf(s fakeserver.Stats) Stats {
	return Stats{
		Requests: s.Requests, Submits: s.Submits, Queries: s.Queries,
		SideEffects: s.SideEffects, Keys: s.Keys, MaxEffectsPerKey: s.MaxEffectsPerKey,
		Replays: s.Replays, Conflicts: s.Conflicts, Refusals: s.Refusals, ForeignEffects: s.ForeignEffects,
		MaxSubmitsAfterFinal: s.MaxSubmitsAfterFinal,
	}
}

func keyStatsOf(k fakeserver.KeyStats) KeyStats {
	return KeyStats{
		Effects: k.Effects, ForeignEffects: k.ForeignEffects,
		SubmitsAfterFinal: k.SubmitsAfterFinal, Conflicts: k.Conflicts, Refusals: k.Refusals,
	}
}

func requestOf(r fakeserver.Request) Request {
	return Request{
		Method: r.Method, Path: r.Path, Scope: r.Scope, Key: r.Key, RawKey: r.RawKey,
		BodySHA256: r.BodySHA256, Status: r.Status, Fault: FaultKind(r.Fault), At: r.At,
	}
}

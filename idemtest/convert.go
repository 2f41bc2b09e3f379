package idemtest

import "github.com/idemkit/idem/internal/fakeserver"

// The exported types are copies of the fake server's, field for field, so
// that go doc shows their fields here (the server's package is internal).
// Those whose fields have the same types (Behavior, Stats, KeyStats,
// Webhook, WebhookStats) convert with a Go conversion, which does not
// compile once a field is added on one side only; the others, holding a
// FaultKind, convert with these functions, and TestTypesMirrorTheServers
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

func requestOf(r fakeserver.Request) Request {
	return Request{
		Method: r.Method, Path: r.Path, Scope: r.Scope, Key: r.Key, RawKey: r.RawKey,
		BodySHA256: r.BodySHA256, Status: r.Status, Fault: FaultKind(r.Fault), At: r.At,
	}
}

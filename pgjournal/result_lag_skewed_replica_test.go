package pgjournal_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/pgjournal"
)

// aheadClock is a replica's clock that reads ahead of the shared (true)
// clock by a fixed offset: NTP broken on one node, a VM whose clock was
// never put right. It sleeps on the shared clock.
type aheadClock struct {
	*idemtest.Clock
	ahead time.Duration
}

func (c aheadClock) Now() time.Time { return c.Clock.Now().Add(c.ahead) }

// Binance answers its GET order with -2013 "Order does not exist." for an
// order it placed up to about a minute ago (dev.binance.vision, "FAQ:
// Error message Order does not exist"; 22 s and 62 s measured), and its
// newClientOrderId is "a unique id among open orders": once a market
// order has filled, the same id places a second order. idem therefore
// takes a "not found" within WithResultLag of the last send for the read
// path lagging, and resends only after it. Replica A sends the order, its
// answer lost, and its call ends unknown with the read path still behind;
// the order's next visit is replica B's, whose clock runs two minutes
// ahead of A's (leases are judged by the database's clock, so nothing
// else keeps the replicas apart). Read by B's clock, A's send was two
// minutes old, the lag over at once: B's -2013 let the id go again and
// placed a second order, settled succeeded (2 submits, 2 orders; B up
// for an hour before, so its start-up did not count for it). Nor did it
// when B had started 90 s before A sent: A's send, stamped by A's clock
// before B's start by B's, was counted from B's start, 2 min over by the
// time B visited 35 s after the send (2 orders). B counts the lag of a
// send another replica made from when it first read it: it only asks,
// and finds the one order once the read path has caught up.
func TestResultLagOfAnotherReplicasSendByAClockAhead(t *testing.T) {
	for _, row := range []struct {
		name, visit string
		bUp         time.Duration // how long B has been up when A sends
	}{
		{"caller's retry", "caller's retry", time.Hour},
		{"Resume", "Resume", time.Hour},
		{"caller's retry, B started just before", "caller's retry", 90 * time.Second},
		{"Resume, B started just before", "Resume", 90 * time.Second},
	} {
		t.Run(row.name, func(t *testing.T) {
			ctx := context.Background()
			shared := idemtest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
			key := crashtest.Key(1)
			b := idemtest.ClientOrderID()
			b.OpenOnly = true
			srv, err := idemtest.NewServer(idemtest.WithClock(shared.Now), idemtest.WithBehavior(b))
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: key, Delay: 62 * time.Second}))

			schema := openStore(t).Schema()
			newReplica := func(owner string, clock idem.Clock, hc *http.Client) *idem.Client {
				s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				c, err := idem.New(s, append([]idem.Option{
					idem.WithHTTPClient(hc), idem.WithClock(clock),
					idem.WithResultEndpoint(srv.ResultTemplate()),
					idem.WithLease(owner, idem.DefaultLeaseDuration),
				}, crashtest.BehaviorOptions(b)...)...)
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			a := newReplica("a", shared, &http.Client{Transport: &crashtest.LoseFirstOrder{Base: srv.Client().Transport}})
			bc := newReplica("b", aheadClock{shared, 2 * time.Minute}, srv.Client())

			// A has been up a while; B started bUp before A sends.
			_, err = a.Resume(ctx)
			require.NoError(t, err)
			shared.Advance(time.Hour)
			bStarted := shared.Now()
			_, err = bc.Resume(ctx)
			require.NoError(t, err)
			shared.Advance(row.bUp)

			req := idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)}
			placed := shared.Now()
			res, err := a.Submit(ctx, req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "A's call, the read path still behind")
			require.Equal(t, idem.StateUnknown, res.State)
			require.Equal(t, 1, submits(srv, key))
			// B visits once its start is over the lag ago by its clock.
			if d := bStarted.Add(idem.DefaultResultLag + 5*time.Second).Sub(shared.Now()); d > 0 {
				shared.Advance(d)
			}
			require.Less(t, shared.Now().Sub(placed), 62*time.Second, "the read path still behind when B visits")

			switch row.visit {
			case "caller's retry":
				res, err = bc.Submit(ctx, req)
				t.Logf("B's Submit: %v, %v", res.State, err)
			case "Resume":
				sum, err := bc.Resume(ctx)
				require.NoError(t, err)
				t.Logf("B's Resume: %+v", sum)
			}
			require.Equal(t, 1, srv.KeyStats("", key).Effects, "orders placed")
			require.Equal(t, 1, submits(srv, key), "submits: B must only ask while A's send may still be behind the read path")

			// Once the read path has caught up, the one order is found.
			shared.Advance(idem.DefaultResultLag)
			_, err = bc.Resume(ctx)
			require.NoError(t, err)
			op, err := bc.Lookup(ctx, "", key)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Equal(t, 1, submits(srv, key))
			require.Equal(t, 1, srv.KeyStats("", key).Effects)
		})
	}
}

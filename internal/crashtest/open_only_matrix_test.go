package crashtest_test

import (
	"testing"

	"github.com/idemkit/idem/idemtest"
)

// TestFaultMatrixWhereFilledOrdersFreeTheirID runs the client-order-id
// matrix against an exchange that frees a client order id once its
// order has filled (Binance's newClientOrderId, "a unique id among open
// orders"; KuCoin's clientOid: Behavior.OpenOnly), where every resend
// of a placed order places it again. Under query-lag, Binance's -2013
// for an order it has placed (dev.binance.vision FAQ; up to a minute),
// a resend at the first "not found" placed a second order; the matrix's
// promises hold only if idem waits out the result lag.
func TestFaultMatrixWhereFilledOrdersFreeTheirID(t *testing.T) {
	ops := 100 // with fewer, the mixed faults meet on one order too rarely to show the harm
	if testing.Short() {
		ops = 20
	}
	b := idemtest.ClientOrderID()
	b.OpenOnly = true
	runMatrix(t, b, ops)
}

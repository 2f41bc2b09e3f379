package crashtest

import (
	"crypto/sha256"
	"fmt"
)

// Key returns the idempotency key of operation i of the workload: "op-0007".
// Keys are deterministic so that a restarted process, or a test, can name
// the same business intent again.
func Key(i int) string { return fmt.Sprintf("op-%04d", i) }

// Body returns the request body of operation i, the same bytes every time.
// It holds the key as client_order_id, where an order API whose key is a
// client order id reads it (idemtest.ClientOrderID, the client with
// idem.WithKeyInBody); a server that reads a key header ignores it.
func Body(i int) []byte {
	return fmt.Appendf(nil, `{"client_order_id":%q,"order":"draft-%04d","amount":%d,"currency":"EUR"}`, Key(i), i, 100+(i*7919)%90000)
}

// BodySHA returns the SHA-256 of Body(i), as the fake server logs it.
func BodySHA(i int) [32]byte { return sha256.Sum256(Body(i)) }

// OrdersPath is where the workload submits its operations.
const OrdersPath = "/orders"

// Credential is what the workload's clients send in Authorization, added by
// idem.WithRequestHook and never journaled. The fake server scopes keys by
// it.
const Credential = "Bearer sk_test_crashtest"

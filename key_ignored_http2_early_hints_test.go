package idem_test

import "testing"

// First contact with a key-ignoring charge endpoint over HTTP/2
// (h2KeyIgnoringCharges) behind a CDN that sends 103 Early Hints to
// every HTTP/2 request before it forwards it (Fastly's VCL early_hints:
// "Emit an HTTP 103 early hint informational response to help the
// client start making preparations for processing the final response
// ... only effective for clients connecting using HTTP/2 or later", its
// example calling it in vcl_recv for any request over h2,
// https://docs.fastly.com/documentation/reference/vcl/functions/tls-and-http/early-hints/);
// then the stream charges and is reset PROTOCOL_ERROR (modelled, as in
// TestKeyIgnoredEndpointHTTP2ProtocolErrorOnFirstContact). A 1xx is no
// answer (RFC 9110 15.2: "an interim response ... prior to completing
// the requested action and sending a final response"), but net/http's
// trace reports it as the first response byte, which idem took for an
// answer to the copy written: net/http's resend after the reset was let
// through, the copy charged again (pay_2) and its 201 settled the
// payment, one attempt journaled, unflagged: two charges. Now an
// interim response leaves the copy unanswered: one charge, which the
// status endpoint settles.
func TestKeyIgnoredEndpointHTTP2EarlyHintsThenProtocolError(t *testing.T) {
	requireOneChargeQueried(t, h2Answer{interim: "103", protocolError: true})
}

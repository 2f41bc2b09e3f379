package idem

import "bytes"

// faultWords are an error's words that say the server failed, not that it
// refused the request: the 500 or 503 of an API that answers them 200 OK
// in its envelope. Kraken's spot API answers every call 200, its
// "EGeneral:Internal error" an unexpected server-side error and its
// "EService:Unavailable" and "EService:Busy" the matching engine offline
// or overloaded (docs.kraken.com/exchange/guides/general/errors), behind
// which an order may have been placed (veox/python3-krakenex#52).
var faultWords = [...]string{"internal error", "internal server error", "eservice:unavailable", "eservice:busy"}

// unknownWords are a refusal's words that say the request's outcome is
// unknown (outcomeUnknown).
var unknownWords = [...]string{"may or may not have", "status unknown", "does not mean that the request was successful or failed",
	"confirm before placing again"}

// outcomeUnknown reports whether a refusal's body says the request's
// outcome is unknown: OKX's 50004, HTTP 400, "Endpoint request timeout
// (does not mean that the request was successful or failed, please check
// the request result)"; Zerodha Kite's 400 "Order request timed out.
// Please check the order book and confirm before placing again." (the
// order placed 8 s later, kite.trade/forum/discussion/comment/35732);
// Bitvavo's 101 and 109, "Operation may or may not have succeeded"
// (support.bitvavo.com, API error messages); Binance's -1006 and -1007,
// "Execution status unknown". Such a 4xx is the server's timeout, not its refusal: the request may
// have executed.
func outcomeUnknown(body []byte) bool {
	return saysAny(body, unknownWords[:]...)
}

// envelopeFault reports whether a 2xx body carries an error (carriesError)
// whose words say the server failed (faultWords) or that the outcome is
// unknown (outcomeUnknown): no outcome of the request, which may have
// executed, however a decoder that fails any error reads it.
func envelopeFault(body []byte) bool {
	lower := bytes.ToLower(body)
	return (containsAny(lower, faultWords[:]...) || containsAny(lower, unknownWords[:]...)) && carriesError(body)
}

package idem

import "bytes"

// faultWords are an error's words that say the server failed, not that it
// refused the request: the 500 or 503 of an API that answers them 200 OK
// in its envelope. Kraken's spot API answers every call 200, its
// "EGeneral:Internal error" an unexpected server-side error and its
// "EService:Unavailable" and "EService:Busy" the matching engine offline
// or overloaded (docs.kraken.com/exchange/guides/general/errors), behind
// which an order may have been placed (veox/python3-krakenex#52);
// Bitvavo's 101 and 109 say so in words ("Operation may or may not have
// succeeded", docs.bitvavo.com/docs/errors), Binance's -1006 and -1007
// ("execution status unknown").
var faultWords = [...]string{"internal error", "internal server error", "eservice:unavailable", "eservice:busy",
	"may or may not have", "status unknown"}

// envelopeFault reports whether a 2xx body carries an error (carriesError)
// whose words say the server failed (faultWords): no outcome of the
// request, which may have executed, however a decoder that fails any
// error reads it.
func envelopeFault(body []byte) bool {
	text := bytes.ToLower(body)
	return containsAny(text, faultWords[:]...) && carriesError(body)
}

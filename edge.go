package idem

import (
	"net/http"
	"strings"
)

// edgeUnforwarded reports whether an answer of status with header h is
// Cloudflare's edge saying it never passed the request on to the origin
// (support.cloudflare.com/hc/en-us/articles/115003011431): 521, the
// origin refused the edge's connection; 523, the origin could not be
// reached at all; 525, the TLS handshake with the origin failed, before
// any byte of the request. Nothing executed. Not 520 or 524, which the
// origin answered or was working on, nor 522, which Cloudflare also
// answers when the origin took the request and did not acknowledge it.
// Cloudflare names itself in Server and marks every answer with CF-Ray.
func edgeUnforwarded(status int, h http.Header) bool {
	switch status {
	case 521, 523, 525:
		return strings.EqualFold(headerValue(h, "Server"), "cloudflare") && headerValue(h, "Cf-Ray") != ""
	}
	return false
}

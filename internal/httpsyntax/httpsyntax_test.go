package httpsyntax

import "testing"

func TestValidHeaderName(t *testing.T) {
	for name, want := range map[string]bool{
		"Idempotency-Key": true, "X-Request-Id": true, "a!#$%&'*+.^_`|~9": true,
		"": false, "Request Id": false, "Key:": false, "Ключ": false, "k\x7f": false, "k\r\n": false, "(k)": false,
	} {
		if got := ValidHeaderName(name); got != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://api.example.com/v1/orders":                         "https://api.example.com/v1/orders",
		"https://api.example.com/v1/orders?b=2&a=1":                 "https://api.example.com/v1/orders?b=2&a=1", // untouched: no secret
		"https://api.example.com/v1/orders?API_KEY=sk&a=1":          "https://api.example.com/v1/orders?API_KEY=REDACTED&a=1",
		"https://u:pw@api.example.com/x?client_secret=s&password=p": "https://REDACTED:REDACTED@api.example.com/x?client_secret=REDACTED&password=REDACTED",
		// Stripe's secret key is the basic-auth user name, its password empty.
		"https://sk_live_abc:@api.stripe.com/v1/charges": "https://REDACTED:REDACTED@api.stripe.com/v1/charges",
		"https://sk_live_abc@api.stripe.com/v1/charges":  "https://REDACTED@api.stripe.com/v1/charges",
		"https://api.example.com/x?token=paypal-order":   "https://api.example.com/x?token=paypal-order",
		// Vonage's pair: a legacy record showed the secret beside the
		// redacted key.
		"https://rest.nexmo.com/sms/json?api_key=k&api_secret=s": "https://rest.nexmo.com/sms/json?api_key=REDACTED&api_secret=REDACTED",
		"https://apim.example.com/pay?subscription-key=s":        "https://apim.example.com/pay?subscription-key=REDACTED",
		"%zz": "%zz",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// An attempt journaled by a release before the request hook's URL was
// kept out of errors quotes the URL as sent, the hook's API key in its
// query string, where the record's own URL has none: show, list -json and
// admin printed the key. Also the escaped form %q gives it
// (go-retryablehttp's "giving up after" error quotes net/http's).
func TestRedactURLsInSentURL(t *testing.T) {
	const journaled = "https://maps.example.com/v1/orders?zone=eu"
	for text, want := range map[string]string{
		`Post "https://maps.example.com/v1/orders?zone=eu&api_key=sk_live_X": dial tcp: connection refused`:                    `Post "https://maps.example.com/v1/orders?zone=eu&api_key=REDACTED": dial tcp: connection refused`,
		`POST https://h/o?Access_Token=tok&b=1 giving up after 1 attempt(s): Post "https://h/o?f=\"v\"&Access_Token=tok": EOF`: `POST https://h/o?Access_Token=REDACTED&b=1 giving up after 1 attempt(s): Post "https://h/o?f=\"v\"&Access_Token=REDACTED": EOF`,
		`Post "https://h/o?api%5Fsecret=s1": EOF`: `Post "https://h/o?api%5Fsecret=REDACTED": EOF`,
		// Not a query parameter: left as it is.
		`invalid api_key=x in body`:                  `invalid api_key=x in body`,
		`Post "https://h/o?token=paypal-order": EOF`: `Post "https://h/o?token=paypal-order": EOF`,
	} {
		if got := RedactURLsIn(text, journaled); got != want {
			t.Errorf("RedactURLsIn(%q) = %q, want %q", text, got, want)
		}
	}
}

package httpsyntax

import (
	"net/url"
	"testing"
)

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
		// A ';' separates parameters for some servers (golang.org/issue/25192);
		// url.Values dropped the pair, and the secret was shown.
		"https://h/o?a=1;api_key=sk&b=2": "https://h/o?a=1;api_key=REDACTED&b=2",
		// Order and escaping kept: the URL shown is the one journaled.
		"https://h/o?z=1&API_KEY=sk&a=%2f": "https://h/o?z=1&API_KEY=REDACTED&a=%2f",
		// Signed URLs (docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html).
		"https://b.s3.amazonaws.com/t?X-Amz-Credential=AKID%2F20130721%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=86400&X-Amz-Signature=abc": "https://b.s3.amazonaws.com/t?X-Amz-Credential=REDACTED&X-Amz-Expires=86400&X-Amz-Signature=REDACTED",
		"https://a.blob.core.windows.net/c/b?sv=2015-04-05&sp=rw&sig=F%2B6G":                                                                    "https://a.blob.core.windows.net/c/b?sv=2015-04-05&sp=rw&sig=REDACTED",
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
		`Post "https://h/o?api%5Fsecret=s1": EOF`:                `Post "https://h/o?api%5Fsecret=REDACTED": EOF`,
		`Post "https://h/o?zone=eu;api_key=sk_live_X;b=1": EOF`:  `Post "https://h/o?zone=eu;api_key=REDACTED": EOF`,
		`GET "/t?X-Amz-Signature=abc&X-Goog-Signature=def": EOF`: `GET "/t?X-Amz-Signature=REDACTED&X-Goog-Signature=REDACTED": EOF`,
		// Not a query parameter: left as it is.
		`invalid api_key=x in body`:                  `invalid api_key=x in body`,
		`Post "https://h/o?token=paypal-order": EOF`: `Post "https://h/o?token=paypal-order": EOF`,
	} {
		if got := RedactURLsIn(text, journaled); got != want {
			t.Errorf("RedactURLsIn(%q) = %q, want %q", text, got, want)
		}
	}
}

// A query string's parameters are separated by '&' or ';' (which some
// servers read as '&': golang.org/issue/25192).
func TestSecretParamsOfAQuery(t *testing.T) {
	for _, tc := range []struct{ raw, secret, without string }{
		{"", "", ""},
		{"a=1&b=2", "", "a=1&b=2"},
		{"a=1;b=2&c", "", "a=1;b=2&c"},
		{"api_key=x&a=1", "api_key", "a=1"},
		{"a=1;api_key=x&b=2", "api_key", "a=1&b=2"},
		{"a=1&api_key=x;b=2", "api_key", "a=1;b=2"},
		{"api%5Fkey=x;a=1", "api_key", "a=1"},
		{"api_key=x;sig=y", "api_key", ""},
		{"z=9&a=1&&X-Amz-Signature", "X-Amz-Signature", "z=9&a=1&"},
		// Empty pairs kept, as in the same query given without the secret.
		{"&a=1&api_key=x", "api_key", "&a=1"},
		{"api_key=x&&a=1", "api_key", "&a=1"},
		{";api_key=x;a=1", "api_key", ";a=1"},
		{"token=paypal-order;k=1", "", "token=paypal-order;k=1"},
		{"signature=x", "", "signature=x"}, // not a name idem knows
	} {
		if got := SecretParamIn(tc.raw); got != tc.secret {
			t.Errorf("SecretParamIn(%q) = %q, want %q", tc.raw, got, tc.secret)
		}
		if got := WithoutSecretParams(tc.raw); got != tc.without {
			t.Errorf("WithoutSecretParams(%q) = %q, want %q", tc.raw, got, tc.without)
		}
	}
}

// The values a sent URL carried, found in a Transport's text in any of
// the forms a URL shows them, and what a form not known to be one still
// shows as a parameter.
func TestRedactSecretsInKnownValues(t *testing.T) {
	u, err := url.Parse("https://sk_live_u:pw%2Fx@h/o?zone=eu;api_key=a+b%2Fc&X-Amz-Signature=s1")
	if err != nil {
		t.Fatal(err)
	}
	secrets := SecretValues(u)
	for text, want := range map[string]string{
		"key a b/c refused":                "key REDACTED refused",
		"key a+b%2Fc refused":              "key REDACTED refused",
		"key a%20b%2Fc refused":            "key REDACTED refused",
		"signature s1 expired":             "signature REDACTED expired",
		"user sk_live_u, password pw/x":    "user REDACTED, password REDACTED",
		"GET /o?zone=eu;api_key=OTHER EOF": "GET /o?zone=eu;api_key=REDACTED EOF",
		"nothing of it":                    "nothing of it",
	} {
		if got := RedactSecretsIn(text, secrets...); got != want {
			t.Errorf("RedactSecretsIn(%q) = %q, want %q", text, got, want)
		}
	}
}

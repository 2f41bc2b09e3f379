package idem

import (
	"errors"
	"testing"
)

// carriesError reads an error as DecodeJSON does, and DecodeJSON reads
// a body past a leading byte order mark (trimBOM; RFC 8259 8.1 lets a
// parser ignore one, and servers on .NET's UTF8Encoding(true) write
// one): read as carrying none, such an envelope's refusal to a resend
// ({"retCode":110072,…} answered 200 OK) was weighed as no envelope's,
// and a query's 200 error as a search that found nothing.
func TestCarriesErrorPastByteOrderMark(t *testing.T) {
	for _, body := range []string{
		"\ufeff" + `{"retCode":110072,"retMsg":"OrderLinkedID is duplicate","result":{},"retExtInfo":{},"time":1764936000000}`,
		"\ufeff" + `{"error":{"type":"request_error","code":"not_found","detail":"Entity txn_01 not found"},"meta":{"request_id":"r-1"}}`,
		"\ufeff" + `{"data":{"error":{"code":"rate_limited","message":"Too many requests"}}}`,
	} {
		if !carriesError([]byte(body)) {
			t.Errorf("carriesError(%q) = false, want true", body)
		}
	}
	// As DecodeJSON reads the same body.
	body := []byte("\ufeff" + `{"id":"ch_1","error":{"code":"card_declined"}}`)
	if _, err := DecodeJSON(&Answer{StatusCode: 200, Body: body}); !errors.Is(err, errUndecodable) {
		t.Fatalf("DecodeJSON(%q) = %v, want errUndecodable: it carries an error", body, err)
	}
	if !carriesError(body) {
		t.Errorf("carriesError(%q) = false, DecodeJSON reads an error in it", body)
	}
}

package idem

import (
	"runtime"
	"strings"
	"testing"
)

// A refusal's body is read once per answer, whatever its size up to
// WithMaxResponseBytes (1 MiB by default): a body that repeats P2002's
// words ("Unique constraint failed on the fields", Prisma's message, or a
// batch endpoint's list of them) must not be copied again for each
// repetition. Each copied the whole body: a 1 MiB body of them took the
// answer's reader most of a minute.
func TestSaysDuplicateReadsARepeatedRefusalOnce(t *testing.T) {
	body := []byte(strings.Repeat("Unique constraint failed on the fields x ", 2000))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if duplicateWords(body, "client_order_id", "ord-7", true) {
		t.Error("duplicateWords = true for fields that are not the key's member")
	}
	runtime.ReadMemStats(&after)
	// The lower-cased copies, the words and their slice: some times the
	// body, not the body once for each of its lines (2000 times).
	if n := after.TotalAlloc - before.TotalAlloc; n > 64*uint64(len(body)) {
		t.Errorf("duplicateWords allocated %d bytes reading a body of %d; want at most %d", n, len(body), 64*len(body))
	}
}

// FuzzSaysDuplicate feeds the readers of a database's refusal (refusedValue's
// MySQL, PostgreSQL, SQL Server and MongoDB texts, Prisma's fields, Rails'
// words) what a server in front of one may pass on: cut short, unbalanced,
// escaped, not UTF-8. None may panic, and a body that names no refused
// value says nothing of whose it is.
func FuzzSaysDuplicate(f *testing.F) {
	for _, s := range []string{
		"Duplicate entry 'ord-7' for key 'orders.PRIMARY'",
		"Duplicate entry '",
		"Duplicate entry 'x' for key '",
		"DETAIL:  Key (merchant_id, reference)=(42, ord-7) already exists.",
		"Key (a, b)=(1",
		")=(Key (",
		"Key ()=() already exists",
		`Key (\"clientOrderId\")=(\"ord-7\") already exists.`,
		"The duplicate key value is (",
		"The duplicate key value is (42, ord-7).",
		`E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: "ord-7" }`,
		`dup key: { : "ord-7" }`,
		"dup key: {",
		"dup key: { , : , }",
		"\\nUnique constraint failed on the fields: (`clientOrderId`)",
		"Unique constraint failed on the fields: (",
		"Unique constraint failed on the constraint: `Order_clientOrderId_key`",
		`{"errors":["External has already been taken"]}`,
		"\xff\xfeDuplicate entry '\xc3' for key '\xe2\x82'",
	} {
		f.Add([]byte(s), "client_order_id", "ord-7")
	}
	f.Add([]byte("Key (id)=(a,b) already exists."), "external_id", "a,b")
	f.Add([]byte("has already been taken"), "_id", "")
	f.Fuzz(func(t *testing.T, body []byte, name, key string) {
		if named, ours := refusedValue(string(body), name, key); !named && ours {
			t.Fatalf("refusedValue(%q, %q, %q) = unnamed yet ours", body, name, key)
		}
		if duplicateWords(body, "", key, true) {
			t.Fatalf("duplicateWords(%q) with the key in no member = true", body)
		}
		duplicateWords(body, name, key, true)
	})
}

package idem

import "testing"

// FuzzScanResult holds DecodeJSON's fast path to encoding/json's reading:
// whatever body scanResult reads, unmarshalResult reads the same.
func FuzzScanResult(f *testing.F) {
	for _, s := range []string{
		`{"state":"succeeded","resourceId":"ord_1"}`,
		` { "state" : "failed" , "reason" : "card declined" , "resourceId":"" } `,
		`{"id":"ch_1","object":"charge","amount":1999,"captured":true,"failure_code":null,"fee":-0.5e+3}`,
		`{"STATE":"pending","State":null,"RESOURCEID":"x","resourceid":null}`,
		`{"idempotencyKey":"k1","idempotency_key":"k1","key":"k1","state":"processing"}`,
		`{"Id":5,"key":true,"idempotencyKey":null}`,
		`{"note":"caf\u00e9","x":"é","y":1.5E-2,"z":0}`,
		`{"state":"succeeded","state":"failed"}`,
		`{}`, ` {} `, `{"a":{}}`, `{"a":[1]}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":nul}`, `{"a":nullx}`,
		`{"a":"b",}`, `{,}`, `{"a" "b"}`, `{"a":"b"} x`, `null`, `[]`, `"s"`, ``, `{"s\"":"x"}`, "{\"a\":\"\x01\"}",
		`{"ſtate":"succeeded"}`, `{"\u212aey":"x"}`,
		`{"id":"1","error":null,"Errors":null}`, `{"id":"1","error":"x"}`, `{"id":"1","ERROR":false}`, `{"errors":[]}`,
		`{"id":"pay_1","status":"Declined"}`, `{"id":"pay_1","Status":7}`, `{"status":null,"id":"x","STATUS":"failed"}`,
		`{"jsonrpc":"2.0","id":"1","result":null}`, `{"JSONRPC":null,"id":"x","jsonRpc":true}`,
		`{"id":10458724,"status":"approved"}`, `{"id":"x","ID":0}`, `{"Id":-1,"id":12.5e3}`, `{"id":007}`, `{"id":12,"iD":null}`,
		`{"id":123456789012345678901234567890}`, `{"id":5,"id":"ord_1"}`,
		`{"id":7,"success":false,"pending":false}`, `{"id":"x","Success":true,"SUCCESS":false}`, `{"success":"false","id":"x"}`,
		`{"success":false,"success":null}`, `{"success":0}`, `{"success":falsey}`,
		`{"status_code":"406","id":"be929ec4"}`, `{"status_code":402,"Status_Code":null}`, `{"STATUS_CODE":-4.06e2}`,
		`{"status_code":"","id":"x"}`, `{"status_code":"4\u00306"}`, `{"status_code":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := scanResult(body)
		if !ok {
			return
		}
		want, err := unmarshalResult(body)
		if err != nil {
			t.Fatalf("scanResult(%q) read %+v; encoding/json refuses it: %v", body, got, err)
		}
		if got != want {
			t.Fatalf("scanResult(%q) = %+v; encoding/json reads %+v", body, got, want)
		}
	})
}

// The usual answers take the fast path: the fuzz target compares only
// what it reads.
func TestScanResultReadsUsualAnswers(t *testing.T) {
	for _, body := range []string{
		`{"state":"succeeded","resourceId":"ord_1"}`,
		`{"id":"ch_1","object":"charge","amount":1999,"paid":true,"failure_code":null}`,
		`{"id":1234567890,"status":"rejected","status_detail":"cc_rejected_insufficient_amount","transaction_amount":100}`,
		"{\n  \"state\": \"failed\",\n  \"reason\": \"card declined\"\n}\n",
	} {
		got, ok := scanResult([]byte(body))
		want, err := unmarshalResult([]byte(body))
		if !ok || err != nil || got != want {
			t.Errorf("scanResult(%s) = %+v, %v; want %+v, true (json: %v)", body, got, ok, want, err)
		}
	}
}

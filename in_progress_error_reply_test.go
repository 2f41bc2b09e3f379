package idem_test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// wpgReply is a Worldpay Corporate Gateway (WPG) XML reply: the
// order's status, or an error, in a 200 OK whatever became of the order
// (ActiveMerchant's Worldpay gateway takes any 2xx's body for the reply
// and raises on other statuses but 401).
type wpgReply struct {
	Reply struct {
		Error       *wpgError `xml:"error"`
		OrderStatus struct {
			OrderCode string    `xml:"orderCode,attr"`
			Error     *wpgError `xml:"error"`
			Payment   *struct {
				LastEvent string `xml:"lastEvent"`
			} `xml:"payment"`
		} `xml:"orderStatus"`
	} `xml:"reply"`
}

type wpgError struct {
	Code string `xml:"code,attr"`
	Text string `xml:",chardata"`
}

// decodeWPG reads a WPG reply as ActiveMerchant's Worldpay gateway does
// (success_criteria_success?: no success where the reply has an error,
// whose text is the message): an error is the order's failure, an
// AUTHORISED lastEvent its success, REFUSED its decline.
func decodeWPG(a *idem.Answer) (idem.Outcome, error) {
	var r wpgReply
	if err := xml.Unmarshal(a.Body, &r); err != nil {
		return idem.Outcome{}, err
	}
	for _, e := range []*wpgError{r.Reply.Error, r.Reply.OrderStatus.Error} {
		if e != nil {
			return idem.Outcome{State: idem.StateFailed, Reason: fmt.Sprintf("error %s: %s", e.Code, strings.TrimSpace(e.Text))}, nil
		}
	}
	if p := r.Reply.OrderStatus.Payment; p != nil {
		switch p.LastEvent {
		case "AUTHORISED":
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: r.Reply.OrderStatus.OrderCode}, nil
		case "REFUSED":
			return idem.Outcome{State: idem.StateFailed, ResourceID: r.Reply.OrderStatus.OrderCode, Reason: "REFUSED"}, nil
		}
	}
	return idem.Outcome{}, fmt.Errorf("no error and no final lastEvent in the reply")
}

// wpg wraps a reply's content in WPG's envelope.
func wpg(content string) shape {
	return shape{status: http.StatusOK, header: http.Header{"Content-Type": {"text/xml"}}, body: `<?xml version="1.0" encoding="UTF-8"?>` +
		`<!DOCTYPE paymentService PUBLIC "-//WorldPay//DTD WorldPay PaymentService v1//EN" "http://dtd.worldpay.com/paymentService_v1.dtd">` +
		`<paymentService version="1.4" merchantCode="MYMERCHANT"><reply>` + content + `</reply></paymentService>`}
}

// WPG's answer to an Idempotency-Key whose request it is still
// processing (developer.worldpay.com/docs/wpg/troubleshoot/
// idempotencyerrors: error code 9, "Request in progress": "A request
// with the same Idempotency Key is currently being processed"), in its
// standard error message, words that name neither the key nor which
// request. After a gateway's 504 while the authorisation went on
// (issuers may take seconds), the resend got it, a decoder reading WPG's
// errors as failures (as ActiveMerchant does) read it as failed, and the
// call ended ErrFailed for an authorisation that was being made: the
// caller charges again under a new key. A bare "Request in progress" is
// now the key's request running, as "This request is currently in
// progress" is: waited for, resent with the same key, and the stored
// AUTHORISED reply settles it.
func TestRequestInProgressErrorReplyIsNoFailure(t *testing.T) {
	inProgress := wpg(`<orderStatus orderCode="order-7"><error code="9"><![CDATA[Request in progress]]></error></orderStatus>`)
	authorised := wpg(`<orderStatus orderCode="order-7"><payment><paymentMethod>VISA-SSL</paymentMethod>` +
		`<amount value="1000" currencyCode="EUR" exponent="2" debitCreditIndicator="credit"/><lastEvent>AUTHORISED</lastEvent></payment></orderStatus>`)
	v := newVendor(t, shape{status: http.StatusGatewayTimeout, body: `<html><body><h1>504 Gateway Time-out</h1></body></html>`},
		inProgress, inProgress, authorised)
	res, err := v.submit(t, idem.WithDecoder(decodeWPG))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "order-7", res.ResourceID)
	require.Empty(t, res.Review)
	v.requireKeys(t, "Idempotency-Key", "k", 4)

	t.Run("to a first attempt: a request with the key runs, which may be a copy of ours", func(t *testing.T) {
		v := newVendor(t, inProgress, authorised)
		res, err := v.submit(t, idem.WithDecoder(decodeWPG))
		requireForeignKey(t, res, err)
		v.requireKeys(t, "Idempotency-Key", "k", 1)
	})

	t.Run("another error code 9 is the request's own", func(t *testing.T) {
		v := newVendor(t, wpg(`<error code="9"><![CDATA[Invalid idempotency-key]]></error>`))
		res, err := v.submit(t, idem.WithDecoder(decodeWPG))
		requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "", "")
		v.requireKeys(t, "Idempotency-Key", "k", 1)
	})
}

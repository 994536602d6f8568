package prometheus

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A failed query's message goes to status.measurements, status.message and
// an Event, which the Rollout's author reads. Whoever runs the server
// chooses its answers, and the address may lead anywhere the manager can
// reach, so the message holds:
//
//   - of an answer: its HTTP status and, for an answer in the Prometheus
//     API's error format ({"status":"error","errorType":...,"error":...}),
//     its errorType and error, truncated and made printable; never a
//     response body otherwise, nor what a decoder made of one;
//   - of no answer: "could not connect" when no connection was made,
//     whatever the cause (refused, no route, no such host: telling them
//     apart would map the network, and names the resolved address or the
//     DNS server); the TLS problem in the manager's words when the
//     handshake failed (what the Rollout's author fixes with tls.caRef);
//     "the connection failed before a complete answer" otherwise.
const (
	// maxServerText bounds the Prometheus API's own error text.
	maxServerText = 256
	// maxErrorType bounds the API's errorType ("bad_data", "timeout", ...).
	maxErrorType = 32
	// maxLocation bounds a redirect's target.
	maxLocation = 128
	// maxErrorBody is what is read of an answer other than 2xx: an API
	// error is a short JSON object; a longer body is not shown anyway.
	maxErrorBody = 64 << 10
)

// queryError is a failed query: a bounded message for people, and the
// cause for errors.Is and errors.As.
type queryError struct {
	msg string
	err error
}

func (e *queryError) Error() string { return e.msg }
func (e *queryError) Unwrap() error { return e.err }

// answerError is an answer that holds no result, in words fit for status.
type answerError struct {
	status int
	// api: the answer is in the API's error format, whose errorType and
	// error are errorType and errorText.
	api                  bool
	errorType, errorText string
	// reason says what is wrong with a 2xx answer that is not a query
	// response; "" for another answer, of which only the status is told.
	reason string
}

func (e *answerError) Error() string {
	switch {
	case e.api:
		return fmt.Sprintf("HTTP %s: %s: %s", statusText(e.status),
			printable(e.errorType, maxErrorType), printable(e.errorText, maxServerText))
	case e.reason != "":
		return fmt.Sprintf("HTTP %s: bad_response: %s (response body not shown)", statusText(e.status), e.reason)
	}
	return fmt.Sprintf("HTTP %s (response body not shown)", statusText(e.status))
}

// apiFailure reads an answer other than 2xx: an API error says what went
// wrong; anything else (a proxy's error page, a login form) only its
// status.
func apiFailure(status int, body io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(body, maxErrorBody+1))
	if err != nil {
		return err
	}
	var e struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if len(data) > maxErrorBody || json.Unmarshal(data, &e) != nil || e.Status != "error" {
		return &answerError{status: status}
	}
	if e.ErrorType == "" {
		e.ErrorType = "error"
	}
	return &answerError{status: status, api: true, errorType: e.ErrorType, errorText: e.Error}
}

// describe says why a query failed, in words that hold nothing the server
// or the network chose (see the comment at the top of this file).
func describe(err error) string {
	var (
		redirect *RedirectError
		tooLarge *TooLargeError
		budget   *BudgetError
		answer   *answerError
		refused  *RefusedAddressError
	)
	switch {
	case errors.As(err, &redirect):
		return redirect.Error()
	case errors.As(err, &tooLarge):
		return tooLarge.Error()
	case errors.As(err, &budget):
		return budget.Error()
	case errors.As(err, &answer):
		return answer.Error()
	case errors.As(err, &refused):
		return "could not connect: " + refused.Error()
	}
	if problem := tlsProblem(err); problem != "" {
		return "could not connect: " + problem
	}
	if notConnected(err) {
		return "could not connect"
	}
	return "the connection failed before a complete answer"
}

// tlsProblem names a failed TLS handshake in the manager's words: the
// certificate's names and the server's alerts are not repeated.
func tlsProblem(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &unknown):
		return "TLS: certificate signed by unknown authority (set tls.caRef to the CA that signed it)"
	case errors.As(err, &hostname):
		return "TLS: the certificate is not valid for the address' host"
	case errors.As(err, &invalid):
		return "TLS: the certificate is not valid (expired, not yet valid, or not a server certificate)"
	case errors.As(err, &verify):
		return "TLS: the certificate was not accepted"
	case errors.As(err, &record):
		return "TLS: the server did not answer in TLS (is the address http?)"
	case errors.As(err, &alert):
		return "TLS: the server refused the handshake"
	}
	return ""
}

// notConnected reports whether no connection was made: the dial (or the
// name lookup, or the proxy's CONNECT) failed.
func notConnected(err error) bool {
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	return errors.As(err, &dns)
}

func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("%d %s", code, text)
	}
	return fmt.Sprint(code)
}

// printable replaces control characters and invalid UTF-8 of
// server-supplied text and truncates it to at most max bytes, so that it
// can neither forge lines in a log or an Event nor grow status.
func printable(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > max {
			return strings.TrimSpace(b.String()) + "..."
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

package prometheus

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// A failed query's message goes to status.measurements, status.message and
// an Event. Whoever runs the server chooses its answers, so the message
// holds no response body: only the HTTP status and, for an answer in the
// Prometheus API's error format, its errorType and error fields, truncated.
const (
	// maxServerText bounds the Prometheus API's own error text.
	maxServerText = 256
	// maxErrorType bounds the API's errorType ("bad_data", "timeout", ...).
	maxErrorType = 32
	// maxLocation bounds a redirect's target.
	maxLocation = 128
	// maxCause bounds a transport error, which can quote a malformed
	// status line.
	maxCause = 256
)

// queryError is a failed query: a bounded message for people, and the
// cause for errors.Is and errors.As.
type queryError struct {
	msg string
	err error
}

func (e *queryError) Error() string { return e.msg }
func (e *queryError) Unwrap() error { return e.err }

// describe says why a query failed, given the status of the last answer
// (0 when none came).
func describe(err error, status int) string {
	var redirect *RedirectError
	var tooLarge *TooLargeError
	var apiErr *promv1.Error
	switch {
	case errors.As(err, &redirect):
		return redirect.Error()
	case errors.As(err, &tooLarge):
		return tooLarge.Error()
	case errors.As(err, &apiErr) && status != 0:
		if apiErr.Detail != "" {
			// Not an API answer (a proxy's error page, an HTML login
			// form): the client library kept the body in Detail.
			return fmt.Sprintf("HTTP %s (response body not shown)", statusText(status))
		}
		return fmt.Sprintf("HTTP %s: %s: %s", statusText(status),
			printable(string(apiErr.Type), maxErrorType), printable(apiErr.Msg, maxServerText))
	}
	// A transport error: the message already names the address, and the
	// URL that url.Error repeats could push the cause past the bound.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return printable(err.Error(), maxCause)
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

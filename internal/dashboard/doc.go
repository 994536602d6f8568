// Package dashboard is the local web dashboard of `kubectl stepwise
// dashboard`: an HTTP server on 127.0.0.1 that shows Rollouts, their steps,
// Pods, measurements and Events, pushes every change to the page with
// server-sent events fed by watches, and sends the CLI's manual requests
// (promote, abort, retry, pause, resume) through package cli.
//
// It is split as the rest of Stepwise is: the view models (List, Detail,
// Permissions, MergeMeasurements) are pure functions of objects and a
// clock, tested without a cluster; the Hub keeps informers and recomputes
// the views; the Server serves them and guards writes against cross-site
// requests. The page's HTML, CSS and JS (charts included, as inline SVG)
// are embedded: the dashboard needs no network beyond the API server.
package dashboard

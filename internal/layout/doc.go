// Package layout holds the test that keeps the import rules of
// docs/architecture.md true: arrows run down, from the binaries through
// the manager's setup and the controllers to the libraries and the API,
// never back up. It has no code of its own.
package layout

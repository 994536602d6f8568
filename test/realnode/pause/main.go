// Command pause is the real-node test bed's sandbox ("pause") image: it holds
// a Pod's namespaces and does nothing until it is told to stop. Built into an
// image by test/realnode, never pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

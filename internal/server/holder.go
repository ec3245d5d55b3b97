package server

import (
	"fmt"
	"os"

	"github.com/google/uuid"
)

// Holder is a dispatch lease holder name unique to this process:
// host-pid-random, so that a log line says which server leads and a
// restarted process on the same host and pid is still a new holder.
func Holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
}

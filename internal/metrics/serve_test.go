package metrics

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	reg := NewProcessRegistry()
	addr, stop, err := Serve("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("GET /metrics: %s, body lacks go_goroutines", resp.Status)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("still serving after stop")
	}
}

package emulators_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/emulators"
)

// TestDynalite_SurvivesAClientThatAbandonsARequest: dynalite throws, and
// dies, when a client closes the connection before sending the whole body
// of a request, as the AWS SDK does when an attempt times out. The emulator
// must go on serving everyone else.
func TestDynalite_SurvivesAClientThatAbandonsARequest(t *testing.T) {
	p, err := emulators.Start(t.Context(), emulators.DynamoDB, emulators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	addr := strings.TrimPrefix(p.Endpoint, "http://")
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Promise 1,000 bytes, send 10, walk away.
		_, _ = c.Write([]byte("POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/x-amz-json-1.0\r\n" +
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Limit\":1"))
		time.Sleep(50 * time.Millisecond)
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("dynalite died after abandoned requests: %v", err)
	}
	resp.Body.Close()
}

package chat

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkTranslate is the request half of the translation, for a small tool-using request.
func BenchmarkTranslate(b *testing.B) {
	body := []byte(goldenRequest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Translate(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream is the answer half: the recorded text answer through a Stream, chunks encoded.
func BenchmarkStream(b *testing.B) {
	raw, err := os.ReadFile("testdata/text.events")
	if err != nil {
		b.Fatal(err)
	}
	events := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	req, err := Translate([]byte(goldenRequest))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := NewStream(req, "id", created)
		for _, ev := range events {
			for _, c := range s.Event(ev) {
				_ = c.JSON()
			}
		}
	}
}

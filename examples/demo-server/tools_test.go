package main

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"log"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file call the tool handlers directly, with no session, in
// synctest bubbles where slow's seconds are real (fake-clock) seconds.

func newTestTools(logTo *bytes.Buffer) *tools {
	return &tools{log: log.New(logTo, "", 0), lookupEnv: testLookupEnv, step: time.Second}
}

func TestTools_Slow(t *testing.T) {
	tests := []struct {
		name    string
		seconds float64
		want    string
	}{
		{name: "zero", seconds: 0, want: "slept 0 seconds"},
		{name: "fraction", seconds: 2.5, want: "slept 2.5 seconds"},
		{name: "maximum", seconds: 300, want: "slept 300 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logged bytes.Buffer
				start := time.Now()
				res, _, err := newTestTools(&logged).slow(t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, slowInput{Seconds: &tt.seconds})
				if err != nil {
					t.Fatalf("slow: %v", err)
				}
				if diff := cmp.Diff(textResult(tt.want), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
					t.Errorf("slow result mismatch (-want +got):\n%s", diff)
				}
				if got, want := time.Since(start), time.Duration(tt.seconds*float64(time.Second)); got != want {
					t.Errorf("slow slept %v, want %v", got, want)
				}
				if logged.Len() != 0 {
					t.Errorf("slow logged %q, want nothing", logged.String())
				}
			})
		})
	}
}

func TestTools_SlowCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, err = newTestTools(&logged).slow(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, slowInput{Seconds: new(300.0)})
		}()
		time.Sleep(2500 * time.Millisecond) // halfway through the third step
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("slow after cancel returned %v, want context.Canceled", err)
		}
		if got, want := logged.String(), "slow: cancelled after 2 steps\n"; got != want {
			t.Errorf("slow logged %q, want %q", got, want)
		}
	})
}

// TestTools_SlowDefault checks that the input schema's default of 5 seconds
// applies, through a real in-memory session.
func TestTools_SlowDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := newServer(options{})
		if err != nil {
			t.Fatal(err)
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(t.Context(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()

		start := time.Now()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow"})
		if err != nil {
			t.Fatalf("tools/call slow: %v", err)
		}
		if diff := cmp.Diff(textResult("slept 5 seconds"), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
			t.Errorf("slow result mismatch (-want +got):\n%s", diff)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("slow slept %v, want 5s", got)
		}
	})
}

func TestTools_Weather(t *testing.T) {
	tt := newTestTools(new(bytes.Buffer))
	get := func(city string) weatherReport {
		_, r, err := tt.weather(t.Context(), nil, weatherInput{City: city})
		if err != nil {
			t.Fatalf("weather %q: %v", city, err)
		}
		return r
	}
	want := weatherReport{City: "Lisbon", Conditions: "sunny", Temperature: temperature{Value: 26, Unit: "celsius"}, HumidityPct: 0, WindKPH: 55}
	if diff := cmp.Diff(want, get("Lisbon")); diff != "" {
		t.Errorf("weather Lisbon mismatch (-want +got):\n%s", diff)
	}
	if get("Oslo") == get("Lisbon") {
		t.Error("Oslo and Lisbon got the same report")
	}
}

func TestTools_Env(t *testing.T) {
	tt := newTestTools(new(bytes.Buffer))
	for name, want := range map[string]string{"DEMO_SET": "set", "DEMO_EMPTY": "set", "DEMO_UNSET": "unset"} {
		res, _, err := tt.env(t.Context(), nil, envInput{Name: name})
		if err != nil {
			t.Fatalf("env %s: %v", name, err)
		}
		if diff := cmp.Diff(textResult(want), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
			t.Errorf("env %s mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// TestTools_PictureLargest calls picture directly: 4 MiB is too slow to
// send through every transport of TestServer_Media under the race detector.
func TestTools_PictureLargest(t *testing.T) {
	size := maxPictureKiB
	res, _, err := newTestTools(new(bytes.Buffer)).picture(t.Context(), nil, pictureInput{SizeKiB: &size})
	if err != nil {
		t.Fatalf("picture: %v", err)
	}
	checkPNG(t, imageData(t, res, 0), 256, 4096, 4096*1024, 4096*1024*11/10)
	small, err := noisePNG(1)
	if err != nil {
		t.Fatal(err)
	}
	// A smaller picture's pixels are the first rows of a larger one's.
	large, err := png.Decode(bytes.NewReader(imageData(t, res, 0)))
	if err != nil {
		t.Fatal(err)
	}
	first, err := png.Decode(bytes.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := large.(*image.NRGBA).Pix[:256*4], first.(*image.NRGBA).Pix; !bytes.Equal(got, want) {
		t.Error("the first row of the largest picture is not the 1 KiB picture")
	}
}

func TestGradientPNG(t *testing.T) {
	data, err := gradientPNG(16)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	corners := map[[2]int]color.NRGBA{
		{0, 0}:   {R: 0, G: 0, B: 128, A: 255},
		{15, 0}:  {R: 255, G: 0, B: 128, A: 255},
		{0, 15}:  {R: 0, G: 255, B: 128, A: 255},
		{15, 15}: {R: 255, G: 255, B: 128, A: 255},
	}
	for xy, want := range corners {
		if got := color.NRGBAModel.Convert(img.At(xy[0], xy[1])); got != want {
			t.Errorf("pixel %v = %v, want %v", xy, got, want)
		}
	}
}

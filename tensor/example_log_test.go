package tensor_test

import (
	"log/slog"
	"os"

	"gocompile/tensor"
)

func double(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(2) }

// A service sends gocompile's logs to its own logger, here one that
// writes JSON, where a graph is a string attribute. (Through log/slog's
// own default handler a graph prints as code.) GOCOMPILE_LOGS, which
// whoever runs the service sets, chooses what is logged; warnings are
// logged whatever it says.
func ExampleSetLogger() {
	tensor.SetLogger(slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for stable output
			}
			return a
		},
	})))
	defer tensor.SetLogger(nil) // back to slog.Default()

	os.Setenv("GOCOMPILE_LOGS", "graph")
	defer os.Unsetenv("GOCOMPILE_LOGS")
	tensor.Compile(double)(tensor.Zeros(tensor.Float32, 3).To(tensor.CPU)) // a graph on the CPU
	// Output:
	// {"level":"INFO","msg":"gocompile: graph","function":"gocompile/tensor_test.double","graph":"func graph(x0 float32[3]) (float32[3]) {\n    v1 := x0.Mul(2)  // float32[3]  example_log_test.go:10\n    return v1\n}"}
}

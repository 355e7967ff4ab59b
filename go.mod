module gocompile

go 1.25.0

require github.com/x448/float16 v0.8.4

require gonum.org/v1/gonum v0.17.0

require github.com/ebitengine/purego v0.11.3 // indirect

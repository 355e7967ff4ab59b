module gocompile

go 1.24.0

require github.com/x448/float16 v0.8.4

require gonum.org/v1/gonum v0.17.0

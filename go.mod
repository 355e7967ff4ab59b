module gocompile

go 1.26.0

require github.com/x448/float16 v0.8.4

require gonum.org/v1/gonum v0.17.0

require (
	github.com/campoy/embedmd v1.0.0 // indirect
	github.com/ebitengine/purego v0.11.3
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/sbinet/npyio v0.6.0
	golang.org/x/sync v0.24.0
)

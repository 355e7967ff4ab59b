package ir

import "fmt"

// DeviceType says what kind of processor holds a tensor's storage.
type DeviceType uint8

// The device types.
const (
	DeviceCPU DeviceType = iota
	DeviceCUDA
)

// Device is where a tensor's storage lives and its ops run.
type Device struct {
	Type  DeviceType
	Index int
}

// CPU is the host.
var CPU = Device{Type: DeviceCPU}

// CUDA is GPU number i.
func CUDA(i int) Device { return Device{Type: DeviceCUDA, Index: i} }

func (d Device) String() string {
	switch {
	case d.Type == DeviceCUDA:
		return fmt.Sprintf("cuda:%d", d.Index)
	case d.Type == DeviceCPU && d.Index == 0:
		return "cpu"
	}
	return fmt.Sprintf("device(type %d, index %d)", d.Type, d.Index) // not a device: say so
}

// Valid reports whether d names a device: the CPU, or a GPU with an index
// that is not negative (whether that GPU exists is another matter).
func (d Device) Valid() bool {
	return d == CPU || (d.Type == DeviceCUDA && d.Index >= 0)
}

// Target is what a tensor converts to: a DType or a Device. Only those two
// types implement it.
type Target interface{ target() }

func (DType) target()  {}
func (Device) target() {}

package array

import "syscall"

// machineBytes is the machine's RAM and swap in bytes, or 0 if unknown.
func machineBytes() uint64 {
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) != nil {
		return 0
	}
	unit := uint64(info.Unit)
	if unit == 0 { // kernels before 2.3.23 count in bytes
		unit = 1
	}
	return (uint64(info.Totalram) + uint64(info.Totalswap)) * unit
}

module kgpu.invalid/conformance/migparted

go 1.24.6

require (
	github.com/NVIDIA/mig-parted v0.10.0
	sigs.k8s.io/yaml v1.4.0
)

require (
	github.com/NVIDIA/go-nvlib v0.7.0 // indirect
	github.com/NVIDIA/go-nvml v0.12.4-0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	golang.org/x/sys v0.21.0 // indirect
)

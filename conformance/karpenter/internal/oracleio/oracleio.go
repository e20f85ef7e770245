// Package oracleio holds what the Karpenter oracles (karpenter-oracle, consolidation-oracle) read and write
// alike: the input's instance types, turned into Karpenter's cloudprovider.InstanceType, and the
// instance-type options of a NodeClaim as they print them.
package oracleio

import (
	"fmt"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	kscheduling "sigs.k8s.io/karpenter/pkg/scheduling"
)

// OfferingIn is one offering of an input instance type (kgpu's catalog: zone, capacity type, price).
type OfferingIn struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    *bool   `json:"available,omitempty"`
}

// InstanceTypeIn is one input instance type.
type InstanceTypeIn struct {
	Name         string                           `json:"name"`
	Capacity     corev1.ResourceList              `json:"capacity"`
	KubeReserved corev1.ResourceList              `json:"kubeReserved"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	Offerings    []OfferingIn                     `json:"offerings"`
}

// OfferingOut is an offering as the oracles print it.
type OfferingOut struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// OptionOut is one instance-type option of a NodeClaim as the oracles print it.
type OptionOut struct {
	Name      string        `json:"name"`
	Price     float64       `json:"price"`
	Offerings []OfferingOut `json:"offerings"`
}

// InstanceType is the input type as a cloudprovider.InstanceType: its offerings, and their zones and
// capacity types as requirements of the type too (what the cloud provider offers it in). The error names
// the field at fault, relative to the type.
func InstanceType(in InstanceTypeIn) (*cloudprovider.InstanceType, error) {
	if in.Name == "" {
		return nil, fmt.Errorf("name: required")
	}
	if len(in.Offerings) == 0 {
		return nil, fmt.Errorf("offerings: at least one offering is required (%s)", in.Name)
	}
	reqs := kscheduling.NewNodeSelectorRequirements(in.Requirements...)
	offerings := cloudprovider.Offerings{}
	for _, o := range in.Offerings {
		offerings = append(offerings, &cloudprovider.Offering{
			Requirements: kscheduling.NewLabelRequirements(map[string]string{
				v1.CapacityTypeLabelKey:  o.CapacityType,
				corev1.LabelTopologyZone: o.Zone,
			}),
			Price:     o.Price,
			Available: lo.FromPtrOr(o.Available, true),
		})
	}
	avail := offerings.Available()
	reqs.Add(kscheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn,
		lo.Uniq(lo.Map(avail, func(o *cloudprovider.Offering, _ int) string { return o.Zone() }))...))
	reqs.Add(kscheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn,
		lo.Uniq(lo.Map(avail, func(o *cloudprovider.Offering, _ int) string { return o.CapacityType() }))...))
	return &cloudprovider.InstanceType{
		Name:         in.Name,
		Requirements: reqs,
		Offerings:    offerings,
		Capacity:     in.Capacity,
		Overhead:     &cloudprovider.InstanceTypeOverhead{KubeReserved: in.KubeReserved},
	}, nil
}

// Key is a pod's namespace/name.
func Key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

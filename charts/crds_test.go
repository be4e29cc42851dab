package charts_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The charts render custom resources that client-go's scheme does not know.
// These small structs hold exactly the fields the CRDs define, so a strict
// JSON decode (DisallowUnknownFields) catches a misspelt or misplaced field
// the way the API server's structural schema would.

// networkAttachmentDefinition is k8s.cni.cncf.io/v1 NetworkAttachmentDefinition
// (Multus; NPWG multi-net spec v1.3).
type networkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		// Config is the CNI configuration as a JSON string.
		Config string `json:"config"`
	} `json:"spec"`
}

// multusNetworkSelection is one element of the pod annotation
// k8s.v1.cni.cncf.io/networks in its JSON form.
type multusNetworkSelection struct {
	Name             string         `json:"name"`
	Namespace        string         `json:"namespace,omitempty"`
	Interface        string         `json:"interface,omitempty"`
	IPs              []string       `json:"ips,omitempty"`
	MAC              string         `json:"mac,omitempty"`
	DefaultGateway   []string       `json:"default-route,omitempty"`
	InfinibandGUID   string         `json:"infiniband-guid,omitempty"`
	PCIDeviceID      string         `json:"deviceID,omitempty"`
	CNIArgs          map[string]any `json:"cni-args,omitempty"`
	GatewayRequest   []string       `json:"gateway-request,omitempty"`
	PortMappingsJSON []any          `json:"portMappings,omitempty"`
}

// sriovCNIConfig is the part of the SR-IOV CNI configuration the chart
// relies on.
type sriovCNIConfig struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	VLAN       *int   `json:"vlan,omitempty"`
	SpoofChk   string `json:"spoofchk,omitempty"`
	Trust      string `json:"trust,omitempty"`
	IPAM       struct {
		Type  string `json:"type"`
		Range string `json:"range,omitempty"`
	} `json:"ipam"`
}

// kubeletCPUManagerConfig is the part of kubelet.config.k8s.io/v1beta1
// KubeletConfiguration that deploy/cpu-manager sets.
type kubeletCPUManagerConfig struct {
	metav1.TypeMeta           `json:",inline"`
	CPUManagerPolicy          string            `json:"cpuManagerPolicy"`
	CPUManagerPolicyOptions   map[string]string `json:"cpuManagerPolicyOptions,omitempty"`
	CPUManagerReconcilePeriod metav1.Duration   `json:"cpuManagerReconcilePeriod,omitempty"`
	ReservedSystemCPUs        string            `json:"reservedSystemCPUs,omitempty"`
	TopologyManagerPolicy     string            `json:"topologyManagerPolicy,omitempty"`
	TopologyManagerScope      string            `json:"topologyManagerScope,omitempty"`
}

// calicoIPPool is projectcalico.org/v3 IPPool.
type calicoIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		CIDR             string `json:"cidr"`
		BlockSize        int    `json:"blockSize,omitempty"`
		IPIPMode         string `json:"ipipMode,omitempty"`
		VXLANMode        string `json:"vxlanMode,omitempty"`
		NATOutgoing      bool   `json:"natOutgoing,omitempty"`
		Disabled         bool   `json:"disabled,omitempty"`
		NodeSelector     string `json:"nodeSelector,omitempty"`
		AssignmentMode   string `json:"assignmentMode,omitempty"`
		DisableBGPExport bool   `json:"disableBGPExport,omitempty"`
	} `json:"spec"`
}

// sriovDevicePluginConfig is the SR-IOV network device plugin's config.json.
type sriovDevicePluginConfig struct {
	ResourceList []struct {
		ResourcePrefix  string `json:"resourcePrefix,omitempty"`
		ResourceName    string `json:"resourceName"`
		DeviceType      string `json:"deviceType,omitempty"`
		ExcludeTopology bool   `json:"excludeTopology,omitempty"`
		Selectors       struct {
			Vendors      []string `json:"vendors,omitempty"`
			Devices      []string `json:"devices,omitempty"`
			Drivers      []string `json:"drivers,omitempty"`
			PFNames      []string `json:"pfNames,omitempty"`
			RootDevices  []string `json:"rootDevices,omitempty"`
			PCIAddresses []string `json:"pciAddresses,omitempty"`
			IsRdma       bool     `json:"isRdma,omitempty"`
			LinkTypes    []string `json:"linkTypes,omitempty"`
		} `json:"selectors"`
	} `json:"resourceList"`
}

// serviceMonitor and podMonitor are monitoring.coreos.com/v1
// ServiceMonitor and PodMonitor (Prometheus Operator), the fields the
// chart sets and their siblings.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector monitorNamespaces    `json:"namespaceSelector"`
		JobLabel          string               `json:"jobLabel,omitempty"`
		Endpoints         []monitorEndpoint    `json:"endpoints"`
	} `json:"spec"`
}

type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		NamespaceSelector   monitorNamespaces    `json:"namespaceSelector"`
		JobLabel            string               `json:"jobLabel,omitempty"`
		PodMetricsEndpoints []monitorEndpoint    `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type monitorNamespaces struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// monitorEndpoint is Endpoint / PodMetricsEndpoint (the common part).
type monitorEndpoint struct {
	Port          string `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool   `json:"honorLabels,omitempty"`
}

//! The node's parameter services (rcl_interfaces: list, get, get types,
//! describe, set, set atomically), as `ros2 param` and every ROS client
//! expects them. Every configuration key is a parameter with its type,
//! description, range and read-only flag (`aicc_bridge::ros_parameters`);
//! only the live settings (`aicc_bridge::ros_parameters::Live`) may be set while the
//! bridge runs. A refused set names the parameter and why, and changes
//! nothing.
use std::sync::Arc;

use futures::StreamExt;
use parking_lot::Mutex;
use r2r::rcl_interfaces::msg::{
    FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType, ParameterValue,
    SetParametersResult,
};
use r2r::rcl_interfaces::srv::{
    DescribeParameters, GetParameterTypes, GetParameters, ListParameters, SetParameters,
    SetParametersAtomically,
};
use serde_json::Value;

use aicc_bridge::ros_parameters::Live;
use aicc_bridge::ros_parameters::{parameters, ParamType, Parameter, Range};
use aicc_bridge::Config;

/// The parameters and the live settings behind the services.
pub struct ParameterStore {
    parameters: Mutex<Vec<Parameter>>,
    live: Arc<Live>,
}

impl ParameterStore {
    pub fn new(config: &Config, live: Arc<Live>) -> Self {
        Self { parameters: Mutex::new(parameters(config)), live }
    }

    fn list(&self, prefixes: &[String], depth: u64) -> (Vec<String>, Vec<String>) {
        let parameters = self.parameters.lock();
        let wanted = |name: &str| {
            let under = prefixes.is_empty()
                || prefixes.iter().any(|p| name == p || name.starts_with(&format!("{p}.")));
            let below = prefixes
                .iter()
                .filter(|p| name.starts_with(&format!("{p}.")))
                .map(|p| p.split('.').count())
                .max()
                .unwrap_or(0);
            under && (depth == 0 || name.split('.').count() - below <= depth as usize)
        };
        let names: Vec<String> =
            parameters.iter().map(|p| p.name.clone()).filter(|n| wanted(n)).collect();
        let mut sections: Vec<String> = names
            .iter()
            .filter_map(|n| n.rsplit_once('.').map(|(section, _)| section.to_string()))
            .collect();
        sections.dedup();
        (names, sections)
    }

    fn value(&self, name: &str) -> ParameterValue {
        self.parameters
            .lock()
            .iter()
            .find(|p| p.name == name)
            .map_or_else(not_set, |p| to_message(p.kind, &p.value))
    }

    fn kind(&self, name: &str) -> u8 {
        self.parameters
            .lock()
            .iter()
            .find(|p| p.name == name)
            .map_or(ParameterType::PARAMETER_NOT_SET as u8, |p| type_code(p.kind))
    }

    fn describe(&self, name: &str) -> ParameterDescriptor {
        let parameters = self.parameters.lock();
        let Some(p) = parameters.iter().find(|p| p.name == name) else {
            return ParameterDescriptor { name: name.to_string(), ..Default::default() };
        };
        let mut descriptor = ParameterDescriptor {
            name: p.name.clone(),
            type_: type_code(p.kind),
            description: p.description.clone(),
            read_only: p.read_only,
            additional_constraints: if p.safety {
                "a safety-relevant setting: fixed while the bridge runs".into()
            } else {
                String::new()
            },
            ..Default::default()
        };
        match p.range {
            Some(Range::Double { from, to }) => {
                descriptor.floating_point_range =
                    vec![FloatingPointRange { from_value: from, to_value: to, step: 0.0 }]
            }
            Some(Range::Integer { from, to }) => {
                descriptor.integer_range =
                    vec![IntegerRange { from_value: from, to_value: to, step: 0 }]
            }
            None => {}
        }
        descriptor
    }

    /// Checks a set without applying it.
    fn check(&self, name: &str, value: &ParameterValue) -> Result<f64, String> {
        let parameters = self.parameters.lock();
        let p = parameters.iter().find(|p| p.name == name).ok_or_else(|| {
            format!("parameter '{name}' does not exist (config/default.yaml lists every parameter)")
        })?;
        if p.read_only {
            let why = if p.safety {
                "it bounds what the robot may do, and never changes under a running agent"
            } else {
                "it takes effect at start"
            };
            return Err(format!("parameter '{name}' is read-only while the bridge runs ({why}): restart the bridge with the new value"));
        }
        let number = match (p.kind, value.type_) {
            (ParamType::Double, t) if t == ParameterType::PARAMETER_DOUBLE as u8 => {
                value.double_value
            }
            (ParamType::Double, t) if t == ParameterType::PARAMETER_INTEGER as u8 => {
                value.integer_value as f64
            }
            _ => {
                return Err(format!(
                    "parameter '{name}' is a {}, got a {}",
                    type_name(type_code(p.kind)),
                    type_name(value.type_)
                ))
            }
        };
        if let Some(Range::Double { from, to }) = p.range {
            if !(from..=to).contains(&number) {
                return Err(format!("parameter '{name}' = {number} is outside [{from}, {to}]"));
            }
        }
        Ok(number)
    }

    fn set(&self, name: &str, value: &ParameterValue) -> SetParametersResult {
        let outcome = self.check(name, value).and_then(|number| {
            self.live.set(name, number).map(|()| number).map_err(|e| format!("parameter {e}"))
        });
        match outcome {
            Ok(number) => {
                if let Some(p) = self.parameters.lock().iter_mut().find(|p| p.name == name) {
                    p.value = Value::from(number);
                }
                tracing::info!(parameter = name, value = number, "parameter set");
                SetParametersResult { successful: true, reason: String::new() }
            }
            Err(reason) => {
                tracing::warn!(parameter = name, %reason, "parameter set refused");
                SetParametersResult { successful: false, reason }
            }
        }
    }
}

fn not_set() -> ParameterValue {
    ParameterValue { type_: ParameterType::PARAMETER_NOT_SET as u8, ..Default::default() }
}

fn type_code(kind: ParamType) -> u8 {
    // Each constant is an enum of its own in the generated bindings.
    match kind {
        ParamType::Bool => ParameterType::PARAMETER_BOOL as u8,
        ParamType::Integer => ParameterType::PARAMETER_INTEGER as u8,
        ParamType::Double => ParameterType::PARAMETER_DOUBLE as u8,
        ParamType::String => ParameterType::PARAMETER_STRING as u8,
        ParamType::StringArray => ParameterType::PARAMETER_STRING_ARRAY as u8,
        ParamType::DoubleArray => ParameterType::PARAMETER_DOUBLE_ARRAY as u8,
        ParamType::IntegerArray => ParameterType::PARAMETER_INTEGER_ARRAY as u8,
        ParamType::BoolArray => ParameterType::PARAMETER_BOOL_ARRAY as u8,
    }
}

fn type_name(code: u8) -> &'static str {
    match code {
        c if c == ParameterType::PARAMETER_BOOL as u8 => "bool",
        c if c == ParameterType::PARAMETER_INTEGER as u8 => "integer",
        c if c == ParameterType::PARAMETER_DOUBLE as u8 => "double",
        c if c == ParameterType::PARAMETER_STRING as u8 => "string",
        c if c == ParameterType::PARAMETER_STRING_ARRAY as u8 => "string array",
        c if c == ParameterType::PARAMETER_DOUBLE_ARRAY as u8 => "double array",
        c if c == ParameterType::PARAMETER_INTEGER_ARRAY as u8 => "integer array",
        c if c == ParameterType::PARAMETER_BOOL_ARRAY as u8 => "bool array",
        c if c == ParameterType::PARAMETER_BYTE_ARRAY as u8 => "byte array",
        _ => "unset value",
    }
}

fn to_message(kind: ParamType, value: &Value) -> ParameterValue {
    let mut message = ParameterValue { type_: type_code(kind), ..Default::default() };
    match kind {
        ParamType::Bool => message.bool_value = value.as_bool().unwrap_or_default(),
        ParamType::Integer => message.integer_value = value.as_i64().unwrap_or_default(),
        ParamType::Double => message.double_value = value.as_f64().unwrap_or_default(),
        ParamType::String => {
            message.string_value = value.as_str().map_or_else(|| value.to_string(), str::to_owned)
        }
        ParamType::StringArray => {
            message.string_array_value =
                items(value).iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect()
        }
        ParamType::DoubleArray => {
            message.double_array_value = items(value).iter().filter_map(Value::as_f64).collect()
        }
        ParamType::IntegerArray => {
            message.integer_array_value = items(value).iter().filter_map(Value::as_i64).collect()
        }
        ParamType::BoolArray => {
            message.bool_array_value = items(value).iter().filter_map(Value::as_bool).collect()
        }
    }
    message
}

fn items(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// Creates the services under the node's fully qualified name and serves
/// them on tokio tasks.
pub fn serve(node: &mut r2r::Node, store: Arc<ParameterStore>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let base = node.fully_qualified_name().context("the node's name")?;
    let s = store.clone();
    answer::<ListParameters::Service>(node, &base, "list_parameters", move |request| {
        let (names, prefixes) = s.list(&request.prefixes, request.depth);
        ListParameters::Response {
            result: r2r::rcl_interfaces::msg::ListParametersResult { names, prefixes },
        }
    })?;
    let s = store.clone();
    answer::<GetParameters::Service>(node, &base, "get_parameters", move |request| {
        GetParameters::Response { values: request.names.iter().map(|n| s.value(n)).collect() }
    })?;
    let s = store.clone();
    answer::<GetParameterTypes::Service>(node, &base, "get_parameter_types", move |request| {
        GetParameterTypes::Response { types: request.names.iter().map(|n| s.kind(n)).collect() }
    })?;
    let s = store.clone();
    answer::<DescribeParameters::Service>(node, &base, "describe_parameters", move |request| {
        DescribeParameters::Response {
            descriptors: request.names.iter().map(|n| s.describe(n)).collect(),
        }
    })?;
    let s = store.clone();
    answer::<SetParameters::Service>(node, &base, "set_parameters", move |request| {
        SetParameters::Response {
            results: request.parameters.iter().map(|p| s.set(&p.name, &p.value)).collect(),
        }
    })?;
    answer::<SetParametersAtomically::Service>(
        node,
        &base,
        "set_parameters_atomically",
        move |request| {
            // All or nothing: every one is checked before any is applied.
            let refused =
                request.parameters.iter().find_map(|p| store.check(&p.name, &p.value).err());
            let result = match refused {
                Some(reason) => SetParametersResult { successful: false, reason },
                None => {
                    let results: Vec<SetParametersResult> =
                        request.parameters.iter().map(|p| store.set(&p.name, &p.value)).collect();
                    results
                        .into_iter()
                        .find(|r| !r.successful)
                        .unwrap_or(SetParametersResult { successful: true, reason: String::new() })
                }
            };
            SetParametersAtomically::Response { result }
        },
    )?;
    Ok(())
}

/// Creates the service `<base>/<name>` and answers each request with
/// `respond` on a tokio task.
fn answer<T>(
    node: &mut r2r::Node,
    base: &str,
    name: &str,
    respond: impl Fn(&T::Request) -> T::Response + Send + 'static,
) -> anyhow::Result<()>
where
    T: r2r::WrappedServiceTypeSupport + 'static,
{
    let mut requests =
        node.create_service::<T>(&format!("{base}/{name}"), r2r::QosProfile::default())?;
    tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            let response = respond(&request.message);
            let _ = request.respond(response);
        }
    });
    Ok(())
}

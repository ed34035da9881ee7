//! Compiled kernels, cached by their full WGSL text: one pipeline per (kernel, variant).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{anyhow, Result};

use super::Gpu;

#[derive(Default)]
pub(crate) struct PipelineCache {
    by_source: HashMap<String, Arc<wgpu::ComputePipeline>>,
}

/// A compiled kernel variant.
#[derive(Clone)]
pub struct Kernel {
    pub name: &'static str,
    pipeline: Arc<wgpu::ComputePipeline>,
}

/// A kernel with its buffers bound, ready to record.
pub struct Bound {
    pub kernel: Kernel,
    pub group: wgpu::BindGroup,
}

impl Kernel {
    /// Compiles `source` once; later calls with the same text reuse the pipeline.
    pub fn get(gpu: &Gpu, name: &'static str, source: String) -> Result<Kernel> {
        let mut cache = gpu.pipelines.lock().map_err(|_| anyhow!("pipeline cache poisoned"))?;
        if let Some(p) = cache.by_source.get(&source) {
            return Ok(Kernel { name, pipeline: p.clone() });
        }
        let (pipeline, err) = gpu.caught(wgpu::ErrorFilter::Validation, || {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
            };
            // naga bounds every loop with a hidden counter by default (against infinite loops in
            // untrusted shaders); the extra exit stops drivers from unrolling constant-count loops,
            // so per-row sums kept in arrays went to memory (wgpu#7698; the batched GEMV ran 2-4x
            // slower, docs/PERF.md). Every loop here has a bound; bounds checks stay on.
            let checks =
                wgpu::ShaderRuntimeChecks { force_loop_bounding: false, ..wgpu::ShaderRuntimeChecks::checked() };
            // SAFETY: the kernels are this crate's own WGSL, and each of their loops terminates
            // (constant counts, or counts read from a uniform or a plan the engine writes).
            let module = unsafe { gpu.device.create_shader_module_trusted(desc, checks) };
            gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                // Every kernel writes its workgroup memory before reading it (the sample kernel zeroes
                // its histograms itself), so wgpu's zeroing is pure cost; on the GL backend its
                // polyfill made llvmpipe take ~8 s instead of 0.7 s to compile a matmul pair.
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: false,
                    ..Default::default()
                },
                cache: gpu.driver_cache.as_ref().map(|c| &c.cache),
            })
        });
        if let Some(err) = err {
            return Err(anyhow!("kernel {name} failed to compile on this adapter: {err}"));
        }
        let pipeline = Arc::new(pipeline);
        cache.by_source.insert(source, pipeline.clone());
        Ok(Kernel { name, pipeline })
    }

    /// Binds `buffers` to bindings 0, 1, 2, ... of group 0 (the convention of every kernel).
    pub fn bind(&self, gpu: &Gpu, buffers: &[&wgpu::Buffer]) -> Bound {
        let entries: Vec<(u32, &wgpu::Buffer)> =
            buffers.iter().copied().enumerate().map(|(i, b)| (i as u32, b)).collect();
        self.bind_at(gpu, &entries)
    }

    /// Binds each buffer to the binding number it comes with.
    pub fn bind_at(&self, gpu: &Gpu, buffers: &[(u32, &wgpu::Buffer)]) -> Bound {
        let layout = self.pipeline.get_bind_group_layout(0);
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() })
            .collect();
        let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.name),
            layout: &layout,
            entries: &entries,
        });
        Bound { kernel: self.clone(), group }
    }
}

impl Bound {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, groups: [u32; 3]) {
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }
}

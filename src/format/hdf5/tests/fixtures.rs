//! The fixtures h5py wrote, compared with their manifests (added when they land).

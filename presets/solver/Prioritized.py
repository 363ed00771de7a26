import bpy
settings = bpy.context.active_object.fullbody_ik.settings

settings.method = 'nullspace'
settings.time_limit = 0.05
settings.population = 0
settings.elites = 0
settings.seed = 0
settings.free_root = False
